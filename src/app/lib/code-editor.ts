// The CodeMirror 6 editor behind CodeEditor.svelte, in its own module so that the page loads it
// with a dynamic import(): vite makes it a separate chunk (precached for offline use like every
// built file), fetched only when a custom reward is shown. Line numbers, JavaScript highlighting,
// undo history and the default key bindings, without indentWithTab: Tab and Shift+Tab move the
// focus out of the editor as in any text field (CodeMirror's own accessibility advice), so a
// keyboard user is never trapped. Styles come from CodeMirror's injected style element, which the
// CSP's style-src 'unsafe-inline' allows; colours follow the page's theme variables.

import { defaultKeymap, history, historyKeymap } from '@codemirror/commands';
import { javascriptLanguage } from '@codemirror/lang-javascript';
import { bracketMatching, defaultHighlightStyle, syntaxHighlighting } from '@codemirror/language';
import { EditorState } from '@codemirror/state';
import {
  drawSelection,
  EditorView,
  highlightActiveLine,
  highlightActiveLineGutter,
  keymap,
  lineNumbers,
} from '@codemirror/view';

export interface CodeEditorOptions {
  doc: string;
  /** The editable element's id (so a <label for> and existing selectors reach it). */
  id: string;
  /** Its accessible name. */
  label: string;
  /** Id of the element that describes it (how to leave it with the keyboard), if any. */
  describedBy?: string;
  /** Where the caret or selection starts (offsets into `doc`): the plain field's, when the editor
   * takes over from it while it has the focus, so the next keystroke lands where the user meant. */
  selection?: { anchor: number; head: number };
  /** Called with the whole text after every change the user makes. */
  onChange(text: string): void;
}

export interface CodeEditorHandle {
  getValue(): string;
  /** Replaces the text (a change from outside, e.g. a restored config); no onChange call. */
  setValue(text: string): void;
  focus(): void;
  destroy(): void;
}

const theme = EditorView.theme({
  '&': {
    fontSize: '0.82rem',
    color: 'var(--text)',
    backgroundColor: 'var(--surface)',
    border: '1px solid var(--border)',
    borderRadius: '6px',
  },
  '&.cm-focused': { outline: '2px solid var(--accent)', outlineOffset: '1px' },
  '.cm-scroller': { fontFamily: 'var(--mono)', lineHeight: '1.45' },
  '.cm-content': { caretColor: 'var(--text)' },
  '.cm-gutters': {
    backgroundColor: 'var(--surface-2)',
    color: 'var(--muted)',
    borderRight: '1px solid var(--border)',
  },
  '.cm-activeLine': { backgroundColor: 'color-mix(in srgb, var(--accent-soft) 45%, transparent)' },
  '.cm-activeLineGutter': { backgroundColor: 'var(--accent-soft)' },
});

export function createCodeEditor(parent: HTMLElement, opts: CodeEditorOptions): CodeEditorHandle {
  let applyingOutside = false;
  const attrs: Record<string, string> = {
    id: opts.id,
    'aria-label': opts.label,
    // Matches the page's focusable selector (lib/modal.ts), so a dialog's Tab wrap includes it.
    tabindex: '0',
  };
  if (opts.describedBy) attrs['aria-describedby'] = opts.describedBy;
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc: opts.doc,
      selection: opts.selection && clampSelection(opts.selection, opts.doc.length),
      extensions: [
        lineNumbers(),
        highlightActiveLineGutter(),
        highlightActiveLine(),
        history(),
        drawSelection(),
        bracketMatching(),
        // The language alone (parser, highlighting, indentation): javascript() would add
        // completion sources and snippets, which nothing here switches on.
        javascriptLanguage.extension,
        syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        keymap.of([...defaultKeymap, ...historyKeymap]),
        EditorView.contentAttributes.of(attrs),
        theme,
        EditorView.updateListener.of((u) => {
          if (u.docChanged && !applyingOutside) opts.onChange(u.state.doc.toString());
        }),
      ],
    }),
  });
  return {
    getValue: () => view.state.doc.toString(),
    setValue(text) {
      if (text === view.state.doc.toString()) return;
      applyingOutside = true;
      try {
        view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
      } finally {
        applyingOutside = false;
      }
    },
    focus: () => view.focus(),
    destroy: () => view.destroy(),
  };
}

function clampSelection(
  sel: { anchor: number; head: number },
  length: number,
): { anchor: number; head: number } {
  const clamp = (n: number) => Math.max(0, Math.min(length, n));
  return { anchor: clamp(sel.anchor), head: clamp(sel.head) };
}
