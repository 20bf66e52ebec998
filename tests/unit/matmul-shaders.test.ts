// shaders/matmul.wgsl and shaders/matmul_vec4.wgsl are filled by one uniform layout
// (src/kernels/matmul.ts) and bound by one call, and WGSL has no include: this keeps their uniform
// structs and bindings from drifting apart.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const source = (name: string) => readFileSync(`shaders/${name}.wgsl`, 'utf8');
const paramsStruct = (wgsl: string) => {
  const m = /struct Params \{([^}]*)\}/.exec(wgsl);
  if (!m) throw new Error('no Params struct');
  // Field names and types only: comments and spacing may differ.
  return m[1]
    .split('\n')
    .map((line) => line.replace(/\/\/.*$/, '').trim())
    .filter(Boolean);
};
const bindings = (wgsl: string) =>
  [...wgsl.matchAll(/@binding\((\d)\) var<([^>]+)> (\w+)/g)].map(([, i, space, name]) => ({
    i,
    space,
    name,
  }));

describe('the two matmul shaders', () => {
  it('declare the same Params fields in the same order', () => {
    const scalar = paramsStruct(source('matmul'));
    expect(scalar).toHaveLength(12);
    expect(paramsStruct(source('matmul_vec4'))).toEqual(scalar);
  });

  it('bind a, b, c and params at the same slots with the same access', () => {
    const scalar = bindings(source('matmul'));
    expect(scalar.map((b) => b.name)).toEqual(['a', 'b', 'c', 'params']);
    expect(bindings(source('matmul_vec4'))).toEqual(scalar);
  });
});
