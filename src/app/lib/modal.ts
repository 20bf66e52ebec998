// The behaviour every modal dialog of the page shares, as a Svelte action (`use:modal`): focus moves
// into the dialog (to the element marked `data-initial-focus`, the safe answer, or else the first
// focusable one) and back to whatever had it when the dialog closes; Tab and Shift+Tab wrap inside
// the dialog; Escape gives the dialog's safe answer. One copy, so the consent, discard and share
// dialogs cannot drift apart in how a keyboard user gets in and out of them.

export interface ModalOptions {
  /** What Escape means for this dialog: always the answer that loses or runs nothing. */
  onescape: () => void;
}

const FOCUSABLE =
  'button:not([disabled]), [href], input:not([disabled]), select:not([disabled]), ' +
  'textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

export function focusableIn(root: HTMLElement): HTMLElement[] {
  return [...root.querySelectorAll<HTMLElement>(FOCUSABLE)];
}

export function modal(node: HTMLElement, options: ModalOptions) {
  let current = options;
  const before = document.activeElement as HTMLElement | null;
  const initial = node.querySelector<HTMLElement>('[data-initial-focus]') ?? focusableIn(node)[0];
  initial?.focus();

  function onkeydown(e: KeyboardEvent) {
    if (e.key === 'Escape') {
      e.preventDefault();
      current.onescape();
      return;
    }
    if (e.key !== 'Tab') return;
    const items = focusableIn(node);
    if (items.length === 0) return;
    const first = items[0];
    const last = items[items.length - 1];
    const active = document.activeElement;
    if (e.shiftKey && (active === first || !node.contains(active))) {
      e.preventDefault();
      last.focus();
    } else if (!e.shiftKey && (active === last || !node.contains(active))) {
      e.preventDefault();
      first.focus();
    }
  }

  window.addEventListener('keydown', onkeydown);
  return {
    update(next: ModalOptions) {
      current = next;
    },
    destroy() {
      window.removeEventListener('keydown', onkeydown);
      before?.focus?.();
    },
  };
}
