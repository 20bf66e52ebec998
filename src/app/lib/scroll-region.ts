// A Svelte action (`use:scrollRegion={'Rewards table'}`) for a box that scrolls sideways (a wide
// table on a phone): while its content overflows, the box takes the keyboard focus (tabindex 0)
// so arrow keys can scroll it (WCAG 2.1.1; axe-core's scrollable-region-focusable), and, given a
// label, it is a named region so a screen reader says what the focused box is. While everything
// fits it is neither, so a wide screen gets no tab stop that does nothing.

/** Whether a box with these extents scrolls: its content is wider (or taller) than its box. */
export function overflows(box: {
  scrollWidth: number;
  clientWidth: number;
  scrollHeight: number;
  clientHeight: number;
}): boolean {
  return box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1;
}

export function scrollRegion(node: HTMLElement, label?: string) {
  let name = label;
  function update() {
    if (overflows(node)) {
      node.tabIndex = 0;
      if (name) {
        node.setAttribute('role', 'region');
        node.setAttribute('aria-label', name);
      }
    } else {
      node.removeAttribute('tabindex');
      node.removeAttribute('role');
      node.removeAttribute('aria-label');
    }
  }
  update();
  // The box resizes with the page; its content (the table) changes width with the data.
  const observer = typeof ResizeObserver === 'undefined' ? null : new ResizeObserver(update);
  if (observer) {
    observer.observe(node);
    for (const child of node.children) observer.observe(child);
  }
  return {
    update(next?: string) {
      name = next;
      update();
    },
    destroy() {
      observer?.disconnect();
    },
  };
}
