// Issue 33, item 7: values in generated Markdown. The TRL export's README.md put the model name
// into Markdown as it was, so a name with a backtick and line breaks closed its code span and
// added a raw <script> line and a stray code fence. Every value now goes through mdCode (a code
// span it cannot close, on one line) or mdText (escaped text); the same holds for every value in
// the table rows (a config value with '|' and backticks stays one cell) and for the CLI reports.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/grpo/config';
import { exportTrl } from '../../src/export/trl-export';
import { mdCode, mdOneLine, mdText } from '../../src/export/markdown';
import { createTask, trainEvalProblems } from '../../src/tasks/index';

const HOSTILE = 'evil`\n<script>alert(1)</script>\n```\n# heading\n| a | b |';

function readme(overrides: Record<string, unknown>): string {
  const config = resolveConfig({ steps: 1, perStepPrompts: 1, evalPrompts: 0, ...overrides });
  const { train } = trainEvalProblems(createTask('arithmetic'), config.seed, 1, 0);
  return exportTrl(config, { trainPrompts: train, evalPrompts: [] }).get('README.md') as string;
}

/** The structure a value could break: fence lines, lines of raw HTML, headings, table rows. */
function structure(md: string) {
  const lines = md.split('\n');
  return {
    fences: lines.filter((l) => l.startsWith('```')).length,
    html: lines.filter((l) => /^\s*</.test(l)).length,
    headings: lines.filter((l) => l.startsWith('#')).length,
    rows: lines.filter((l) => l.startsWith('|')).length,
    // Cells per table row: an unescaped '|' in a value would add one.
    cells: lines
      .filter((l) => l.startsWith('|'))
      .map((l) => l.replace(/\\\|/g, '').split('|').length),
  };
}

describe('generated Markdown', () => {
  it("the TRL export's README keeps its structure whatever the model name and config values", () => {
    const plain = readme({
      model: 'HuggingFaceTB/SmolLM2-135M',
      rewards: ['format', 'custom:x'],
      customRewards: { x: 'function reward() { return 1; }' },
    });
    const hostile = readme({
      model: HOSTILE,
      rewards: ['format', 'custom:x'],
      customRewards: { x: 'function reward() { return 1; } // ``` | <script>\n# no' },
    });
    expect(structure(hostile)).toEqual(structure(plain));
    expect(hostile).not.toMatch(/^<script>/m);
    expect(hostile).toContain(
      'Model ````evil`\\n<script>alert(1)</script>\\n```\\n# heading\\n| a | b |````, task',
    );
  });

  it('mdCode: one line, a fence longer than any backtick run inside, the value back exactly', () => {
    fc.assert(
      // Backticks, spaces and line breaks often, so that runs and padding are exercised.
      fc.property(fc.stringMatching(/^[`a \n\r|<\u2028]{1,24}$/), (s) => {
        const code = mdCode(s);
        if (/[\r\n\u2028\u2029]/.test(code)) return false;
        const fence = /^`+/.exec(code)![0];
        if (!code.endsWith(fence)) return false;
        const inner = code.slice(fence.length, code.length - fence.length);
        const runs = (inner.match(/`+/g) ?? []).map((r) => r.length);
        if (Math.max(0, ...runs) >= fence.length) return false;
        // CommonMark strips one space from each side when both are there (the padding).
        const shown = /^ .* $/s.test(inner) && inner.trim() !== '' ? inner.slice(1, -1) : inner;
        return shown === mdOneLine(s);
      }),
      { numRuns: 200 },
    );
  });

  it('mdCode keeps a value that starts and ends with a space (CommonMark strips one each side)', () => {
    expect(mdCode(' a ')).toBe('`  a  `');
    expect(mdCode(' ` ')).toBe('``  `  ``');
    expect(mdCode('   ')).toBe('`   `');
  });

  it('mdText: nothing that opens a Markdown construct stays unescaped', () => {
    expect(mdText('<script>x</script>')).toBe('\\<script\\>x\\</script\\>');
    expect(mdText('# h')).toBe('\\# h');
    expect(mdText('- item')).toBe('\\- item');
    expect(mdText('1. item')).toBe('1\\. item');
    expect(mdText('a | b `c` *d* [e](f) &amp;\nnext')).toBe(
      'a \\| b \\`c\\` \\*d\\* \\[e\\](f) \\&amp;\\nnext',
    );
  });
});
