// The shader loader (src/engine/shaders.ts): `#include "name.wgsl"` pastes shaders/include/name.wgsl,
// an unknown snippet or an include cycle throws naming the file and line, and every line of an
// expanded kernel maps back to the file and line it was written at (for compile errors).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { compilePipeline } from '../../src/engine/pipelines';
import { expandIncludes, shaderLocation, shaderSource } from '../../src/engine/shaders';

const lineOf = (source: string, text: string) =>
  source.split('\n').findIndex((l) => l.startsWith(text)) + 1;

describe('shader includes', () => {
  it('expands the attention kernels: no directive left, each gather defined once', () => {
    for (const name of ['attention_forward', 'attention_backward_dq', 'attention_backward_dkv']) {
      const source = shaderSource(name);
      expect(source).not.toMatch(/^\s*#include/m);
      for (const fn of ['gather_q', 'gather_k', 'gather_v']) {
        expect(source.split(`fn ${fn}(`)).toHaveLength(2);
      }
    }
    const snippet = readFileSync('shaders/include/attention_gather.wgsl', 'utf8');
    expect(shaderSource('attention_forward')).toContain(snippet);
    expect(shaderSource('attention_backward_dq').split('fn gather_do(')).toHaveLength(2);
    // attention_stage_kv.wgsl includes attention_gather.wgsl again: pasted once all the same.
    expect(shaderSource('attention_forward').split('fn stage_kv_tile(')).toHaveLength(2);
  });

  it('maps each expanded line to the file and line it was written at', () => {
    const source = shaderSource('attention_forward');
    const raw = readFileSync('shaders/attention_forward.wgsl', 'utf8');
    const snippet = readFileSync('shaders/include/attention_gather.wgsl', 'utf8');
    expect(shaderLocation(source, lineOf(source, 'fn gather_k('))).toBe(
      `shaders/include/attention_gather.wgsl:${lineOf(snippet, 'fn gather_k(')}`,
    );
    // Lines after the include keep their own file's numbering.
    expect(shaderLocation(source, lineOf(source, 'fn end_row('))).toBe(
      `shaders/attention_forward.wgsl:${lineOf(raw, 'fn end_row(')}`,
    );
    expect(shaderLocation(source, 1)).toBe('shaders/attention_forward.wgsl:1');
    // A kernel without includes is its file as is.
    expect(shaderSource('add')).toBe(readFileSync('shaders/add.wgsl', 'utf8'));
    expect(shaderLocation('not from the loader', 1)).toBeNull();
  });

  it('pastes a snippet once, nested includes resolved', () => {
    const files = {
      '/k/main.wgsl': 'a\n#include "x.wgsl"\n#include "y.wgsl"\nb',
      '/k/inc/x.wgsl': 'x1\n#include "y.wgsl"',
      '/k/inc/y.wgsl': 'y1',
    };
    const { source, origins } = expandIncludes('/k/main.wgsl', files, '/k/inc/');
    expect(source).toBe('a\nx1\ny1\nb');
    expect(origins).toEqual([
      { file: 'k/main.wgsl', line: 1 },
      { file: 'k/inc/x.wgsl', line: 1 },
      { file: 'k/inc/y.wgsl', line: 1 },
      { file: 'k/main.wgsl', line: 4 },
    ]);
  });

  it('an unknown snippet throws naming the including file and line', () => {
    const files = { '/k/main.wgsl': 'a\n  #include "missing.wgsl"  // helpers\n' };
    expect(() => expandIncludes('/k/main.wgsl', files, '/k/inc/')).toThrow(
      'k/main.wgsl:2: #include "missing.wgsl": no such file k/inc/missing.wgsl',
    );
  });

  it('an include cycle throws instead of recursing', () => {
    const files = {
      '/k/main.wgsl': '#include "a.wgsl"',
      '/k/inc/a.wgsl': 'a\n#include "b.wgsl"',
      '/k/inc/b.wgsl': '#include "a.wgsl"',
    };
    expect(() => expandIncludes('/k/main.wgsl', files, '/k/inc/')).toThrow(
      'k/inc/b.wgsl:1: #include "a.wgsl" forms a cycle (k/main.wgsl → k/inc/a.wgsl → k/inc/b.wgsl → k/inc/a.wgsl)',
    );
    const self = { '/k/main.wgsl': 'x', '/k/inc/s.wgsl': '#include "s.wgsl"' };
    self['/k/main.wgsl'] = '#include "s.wgsl"';
    expect(() => expandIncludes('/k/main.wgsl', self, '/k/inc/')).toThrow(/forms a cycle/);
  });

  it('an unknown kernel (or a snippet asked for as a kernel) throws listing the kernels', () => {
    expect(() => shaderSource('nope')).toThrow(/no shader named 'nope'.*attention_forward/);
    expect(() => shaderSource('include/attention_gather')).toThrow(/no shader named/);
  });
});

describe('compile errors in an included snippet', () => {
  it('name the snippet and its line next to the expanded line', async () => {
    const source = shaderSource('attention_forward');
    const snippet = readFileSync('shaders/include/attention_gather.wgsl', 'utf8');
    const line = lineOf(source, 'fn gather_v(');
    // Just enough of a GPUDevice for compilePipeline: the module reports one error at `line`.
    const device = {
      pushErrorScope: () => {},
      popErrorScope: async () => null,
      createShaderModule: () => ({
        getCompilationInfo: async () => ({
          messages: [{ type: 'error', lineNum: line, linePos: 4, message: 'bad thing' }],
        }),
      }),
    } as unknown as GPUDevice;
    const error = await compilePipeline(device, 'attention_forward', source).catch((e) => e);
    expect(error.name).toBe('WgslCompileError');
    expect(error.message).toContain(`at ${line}:4: bad thing`);
    expect(error.message).toContain(`${line} | fn gather_v(`);
    expect(error.message).toContain(
      `shaders/include/attention_gather.wgsl:${lineOf(snippet, 'fn gather_v(')}:4: bad thing`,
    );
  });
});
