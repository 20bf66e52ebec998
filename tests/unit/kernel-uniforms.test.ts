// Every kernel wrapper fills its shader's uniform block from a named layout (src/engine/uniforms.ts)
// exported by its module in src/kernels. This checks each layout against the `struct Params` of
// every shader it names (same field names, types and order), that every shader in shaders/ with a
// Params struct has exactly one layout, and that the two matmul shaders, which one layout fills and
// one call binds, keep the same struct and bindings.
import { describe, expect, it } from 'vitest';
import { shaderSource } from '../../src/engine/shaders';
import { UniformLayout } from '../../src/engine/uniforms';

const kernelModules = import.meta.glob('/src/kernels/*.ts', { eager: true }) as Record<
  string,
  Record<string, unknown>
>;
const layouts = Object.entries(kernelModules).flatMap(([path, exports]) =>
  Object.entries(exports)
    .filter((entry): entry is [string, UniformLayout] => entry[1] instanceof UniformLayout)
    .map(([name, layout]) => ({ name: `${path.replace('/src/kernels/', '')} ${name}`, layout })),
);
const shaderNames = Object.keys(import.meta.glob('/shaders/*.wgsl')).map((path) =>
  path.replace(/^\/shaders\/|\.wgsl$/g, ''),
);

/** The `struct Params` fields of a shader as [name, type], or null when it has none. */
const paramsStruct = (wgsl: string): [string, string][] | null => {
  const m = /struct Params \{([^}]*)\}/.exec(wgsl);
  if (!m) return null;
  // Field names and types only: comments and spacing may differ.
  return m[1]
    .split('\n')
    .map((line) => line.replace(/\/\/.*$/, '').trim())
    .filter(Boolean)
    .map((field) => {
      const f = /^(\w+)\s*:\s*(\w+)\s*,?$/.exec(field);
      if (!f) throw new Error(`unexpected Params field '${field}'`);
      return [f[1], f[2]];
    });
};
const bindings = (wgsl: string) =>
  [...wgsl.matchAll(/@binding\((\d)\) var<([^>]+)> (\w+)/g)].map(([, i, space, name]) => ({
    i,
    space,
    name,
  }));

describe('kernel uniform layouts', () => {
  it('are exported by the kernel modules', () => {
    expect(layouts.length).toBeGreaterThanOrEqual(20);
  });

  it('cover every shader with a Params struct exactly once', () => {
    const withParams = shaderNames.filter((name) => paramsStruct(shaderSource(name)) !== null);
    const filled = layouts.flatMap(({ layout }) => layout.shaders).sort();
    expect(filled).toEqual([...withParams].sort());
  });

  for (const { name, layout } of layouts) {
    for (const shader of layout.shaders) {
      it(`${name} matches struct Params of shaders/${shader}.wgsl`, () => {
        const source = shaderSource(shader);
        expect(paramsStruct(source)).toEqual(layout.names.map((f) => [f, layout.fields[f]]));
        // …and the shader reads that struct from a uniform binding.
        expect(source).toMatch(/var<uniform> params\s*:\s*Params/);
      });
    }
  }

  it('pack each field at its position, a u32 range-checked', () => {
    const layout = layouts.find((l) => l.layout.shaders.includes('add'))!.layout;
    const view = new DataView(layout.pack({ count: 7, alpha: 0.5 }));
    expect(view.byteLength).toBe(16);
    expect(view.getUint32(0, true)).toBe(7);
    expect(view.getFloat32(4, true)).toBe(0.5);
    expect(() => layout.pack({ count: -1, alpha: 0 })).toThrow(RangeError);
  });
});

describe('the two matmul shaders', () => {
  const source = shaderSource;

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
