// Values written into generated Markdown (the TRL export's README.md, the CLI's report READMEs):
// every value that is not the template's own text goes through one of these, so a model name, a
// command line, a config value or a completion can never close a code span or a table cell, start
// a line of raw HTML or a code fence, or add a heading (issue 33: a model name once put a raw
// <script> line and a stray ``` fence into the README).

/** Line breaks and other control characters, shown as escapes so a value stays on its line. */
export function mdOneLine(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f\u2028\u2029]/g, (ch) =>
    ch === '\n'
      ? '\\n'
      : ch === '\r'
        ? '\\r'
        : ch === '\t'
          ? '\\t'
          : `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * `text` as an inline code span it cannot close: one line (line breaks as \n), fenced by one more
 * backtick than its longest run of backticks, padded with a space where it starts or ends with a
 * backtick or both starts and ends with a space. Inside a table cell (`table`), '|' is escaped as
 * '\|', which GFM removes again before the span is read, so the cell shows the value exactly.
 */
export function mdCode(text: string, options: { table?: boolean } = {}): string {
  let body = mdOneLine(text);
  if (options.table) body = body.replaceAll('|', '\\|');
  const longest = Math.max(0, ...(body.match(/`+/g) ?? []).map((run) => run.length));
  const fence = '`'.repeat(longest + 1);
  if (body === '') return '` `';
  // CommonMark strips one space from each side of a span that starts and ends with one (unless it
  // is all spaces): such a value gets a space of padding each side so that it keeps its own.
  const spaced = body.startsWith(' ') && body.endsWith(' ') && body.trim() !== '';
  const pad = body.startsWith('`') || body.endsWith('`') || spaced ? ' ' : '';
  return `${fence}${pad}${body}${pad}${fence}`;
}

/**
 * `text` as plain Markdown text on one line: the characters that open something anywhere in a
 * line (emphasis, code, links, HTML, entities, table cells, strikethrough, escapes) are
 * backslash-escaped, and so is a first character that would open a block (a list item, a heading,
 * a quote), so the text shows as written and starts nothing. '(' needs no escape once '[' has one.
 */
export function mdText(text: string): string {
  const inline = mdOneLine(text.replace(/[\\`*_[\]<>|&~#]/g, (ch) => `\\${ch}`));
  if (/^[-+=]/.test(inline)) return `\\${inline}`;
  return inline.replace(/^(\d+)([.)])/, '$1\\$2');
}
