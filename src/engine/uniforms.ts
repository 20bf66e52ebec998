// Named uniform layouts: each kernel wrapper declares its shader's `struct Params` once, by field
// name and type, and fills it by name. tests/unit/kernel-uniforms.test.ts checks every layout
// against the `struct Params` of the shaders it names, so a field added, removed or reordered on
// one side fails a test instead of shifting every later field by 4 bytes.
import { arenaSlot, UNIFORM_USAGE } from './uniform-arena';

export type UniformType = 'u32' | 'i32' | 'f32';

export class UniformLayout<F extends string = string> {
  /** Field names in declaration order (the WGSL struct's order). */
  readonly names: readonly F[];

  constructor(
    /** The shaders (names in shaders/, without .wgsl) whose `struct Params` this fills. */
    readonly shaders: readonly string[],
    /** Field → type, in the struct's order (all 4-byte scalars, so there are no alignment gaps). */
    readonly fields: Readonly<Record<F, UniformType>>,
  ) {
    this.names = Object.keys(fields) as F[];
  }

  /** The packed bytes: one 4-byte word per field, padded to a multiple of 16 bytes. */
  pack(values: Readonly<Record<F, number>>): ArrayBuffer {
    const words = Math.max(4, Math.ceil(this.names.length / 4) * 4);
    const bytes = new ArrayBuffer(words * 4);
    const view = new DataView(bytes);
    this.names.forEach((name, i) => {
      const value = values[name];
      const type = this.fields[name];
      if (type === 'f32') view.setFloat32(i * 4, value, true);
      else if (type === 'i32') view.setInt32(i * 4, value, true);
      else {
        if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) {
          throw new RangeError(`${this.shaders[0]}.params.${name} must be a u32, got ${value}`);
        }
        view.setUint32(i * 4, value, true);
      }
    });
    return bytes;
  }

  /**
   * The uniform block of one pass recorded into `encoder`: a slot of the encoder's arena when
   * engine.run records it (uniform-arena.ts), else a buffer of its own.
   */
  block(
    device: GPUDevice,
    encoder: GPUCommandEncoder,
    values: Readonly<Record<F, number>>,
  ): GPUBufferBinding {
    const bytes = this.pack(values);
    return arenaSlot(encoder, bytes) ?? { buffer: this.bufferOf(device, bytes) };
  }

  /** A uniform buffer of its own holding `values`. */
  create(device: GPUDevice, values: Readonly<Record<F, number>>): GPUBuffer {
    return this.bufferOf(device, this.pack(values));
  }

  private bufferOf(device: GPUDevice, bytes: ArrayBuffer): GPUBuffer {
    const buffer = device.createBuffer({
      size: bytes.byteLength,
      usage: UNIFORM_USAGE,
      label: `${this.shaders[0]}.params`,
      mappedAtCreation: true,
    });
    new Uint8Array(buffer.getMappedRange()).set(new Uint8Array(bytes));
    buffer.unmap();
    return buffer;
  }
}

/** Declares a layout; `const` keeps the field names as literal types, so `create` checks them. */
export function uniformLayout<const T extends Record<string, UniformType>>(
  shaders: string | readonly string[],
  fields: T,
): UniformLayout<keyof T & string> {
  return new UniformLayout<keyof T & string>(
    typeof shaders === 'string' ? [shaders] : shaders,
    fields,
  );
}
