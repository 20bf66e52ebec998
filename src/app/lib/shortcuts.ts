// The training controls' keyboard shortcuts: S takes a step, P (or Space) runs or pauses. A key
// typed into a field is text, not a command, and Space on a focused button, link or checkbox is
// that control's own activation, so those are left alone; so are keys with a modifier (browser
// shortcuts) and auto-repeat (holding S must not queue steps).

export type ShortcutAction = 'step' | 'toggle-run';

/** The shortcuts as the help lists them. */
export const SHORTCUTS: { keys: string[]; action: ShortcutAction; label: string }[] = [
  { keys: ['S'], action: 'step', label: 'Step' },
  { keys: ['P', 'Space'], action: 'toggle-run', label: 'Run / Pause' },
];

/** The part of a KeyboardEvent this reads (a plain object in tests). */
export interface KeyLike {
  key: string;
  ctrlKey?: boolean;
  metaKey?: boolean;
  altKey?: boolean;
  repeat?: boolean;
  defaultPrevented?: boolean;
  target: EventTarget | null;
}

/** Elements the user types into: every key there is text. */
function isTextField(el: Element): boolean {
  const tag = el.tagName;
  if (tag === 'TEXTAREA' || tag === 'SELECT') return true;
  if ((el as HTMLElement).isContentEditable) return true;
  if (tag !== 'INPUT') return false;
  const type = (el.getAttribute('type') ?? 'text').toLowerCase();
  return !['button', 'checkbox', 'radio', 'range', 'reset', 'submit', 'file', 'color'].includes(
    type,
  );
}

/** Elements that Space activates by themselves. */
function activatesOnSpace(el: Element): boolean {
  return (
    ['BUTTON', 'A', 'SUMMARY', 'INPUT', 'SELECT', 'TEXTAREA'].includes(el.tagName) ||
    el.getAttribute('role') === 'button' ||
    el.getAttribute('role') === 'radio' ||
    el.getAttribute('role') === 'checkbox'
  );
}

/** The action a key press asks for, or null when it is not a shortcut here. */
export function shortcutFor(e: KeyLike): ShortcutAction | null {
  if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey || e.repeat) return null;
  const el =
    e.target && typeof (e.target as Element).tagName === 'string' ? (e.target as Element) : null;
  if (el && isTextField(el)) return null;
  const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
  if (key === 's') return 'step';
  if (key === 'p') return 'toggle-run';
  if (key === ' ' && !(el && activatesOnSpace(el))) return 'toggle-run';
  return null;
}
