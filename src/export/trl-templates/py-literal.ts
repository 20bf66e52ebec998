// Python source text for untrusted strings (custom reward sources and ids, model names, config
// values) in the TRL export. Untrusted text must only ever become DATA in the generated .py files:
// a string literal that cannot end early, or a comment that cannot end its line. Python ends a
// line at \n, \r\n and a bare \r, and refuses NUL bytes anywhere in a source file, so neither
// JSON.stringify nor splitting on \n alone is enough.

const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');

/**
 * A double-quoted Python str literal whose text is pure printable ASCII: quotes and backslashes
 * are escaped, every other character outside 0x20–0x7e is written as \xNN, \uNNNN or \UNNNNNNNN
 * (a surrogate pair as one \U escape, a lone surrogate as \uNNNN, which Python keeps as it is).
 * The literal therefore decodes to exactly `text` and has no raw line break, quote or NUL.
 */
export function pyStr(text: string): string {
  let out = '"';
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x5c) out += '\\\\';
    else if (c === 0x22) out += '\\"';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0d) out += '\\r';
    else if (c === 0x09) out += '\\t';
    else if (c >= 0x20 && c <= 0x7e) out += text[i];
    else if (c < 0x100) out += `\\x${hex(c, 2)}`;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        out += `\\U${hex(((c - 0xd800) << 10) + (d - 0xdc00) + 0x10000, 8)}`;
        i++;
      } else out += `\\u${hex(c, 4)}`;
    } else out += `\\u${hex(c, 4)}`;
  }
  return `${out}"`;
}

/** Every character that some reader treats as a line break (Python, JS, Unicode). */
const LINE_BREAKS = /\r\n|\r|\n|\u2028|\u2029|\u0085|\v|\f/;

/**
 * One comment line's worth of text: controls (C0 but tab, DEL, C1), line and paragraph
 * separators and lone surrogates become visible escapes, so the text can never end the comment.
 */
export function commentText(text: string): string {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const control = (c < 0x20 && c !== 0x09) || (c >= 0x7f && c <= 0x9f);
    const separator = c === 0x2028 || c === 0x2029;
    const high = c >= 0xd800 && c <= 0xdbff;
    const low = c >= 0xdc00 && c <= 0xdfff;
    if (high && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        out += text[i] + text[i + 1]; // a whole astral character (an emoji) stays readable
        i++;
        continue;
      }
    }
    if (control) out += `\\x${hex(c, 2)}`;
    else if (separator || high || low) out += `\\u${hex(c, 4)}`;
    else out += text[i];
  }
  return out;
}

/** Python comment lines quoting arbitrary text, one per line of it, each prefixed with `prefix`. */
export function commentLines(text: string, prefix = '#     '): string {
  return text
    .split(LINE_BREAKS)
    .map((line) => `${prefix}${commentText(line)}`.trimEnd())
    .join('\n');
}
