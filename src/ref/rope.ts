// CPU reference for shaders/rope.wgsl (rotary embedding, Hugging Face rotate_half convention), and
// the inverse frequencies that the kernel wrapper uploads. Rotation in f64 of the f32 angle.
// Legend: R = N·T token rows, Hx heads (H for q, Hkv for k), D head dim.

/**
 * inv_freq[i] = 1 / theta^(2i / D) for i < D/2, rounded to f32 at each step as HF's
 * `1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))` does in f32.
 */
export function ropeInvFreq(D: number, theta: number): Float32Array {
  if (!Number.isInteger(D) || D <= 0 || D % 2 !== 0) {
    throw new RangeError(`rope head dim must be a positive even integer, got ${D}`);
  }
  const f = Math.fround;
  const inv = new Float32Array(D / 2);
  for (let i = 0; i < D / 2; i++) inv[i] = f(1 / f(Math.pow(theta, f((2 * i) / D))));
  return inv;
}

/** The rotation angle of pair i at `position`: one f32 product, as HF's f32 `freqs`. */
export const ropeAngle = (position: number, invFreq: number) => Math.fround(position * invFreq);

/**
 * inv_freq[i] = theta^(−2i/D) in f64, unrounded: the model reference (src/ref/llama.ts) matches the
 * torch float64 fixtures, which compute the frequencies and angles in f64 too.
 */
export function ropeInvFreqF64(D: number, theta: number): Float64Array {
  const f = new Float64Array(D / 2);
  for (let i = 0; i < D / 2; i++) f[i] = 1 / Math.pow(theta, (2 * i) / D);
  return f;
}

/**
 * The rotation itself, HF rotate_half convention: element i pairs with i + D/2 and both turn by
 * angle(position, invFreq[i]); `inverse` applies the transpose (the backward). `out` may be `x`
 * (in place: each pair is read before it is written).
 */
export function ropeRotate(
  x: ArrayLike<number>, // (R, Hx, D)
  positions: ArrayLike<number>, // (R)
  R: number,
  Hx: number,
  D: number,
  invFreq: ArrayLike<number>, // (D/2)
  angle: (position: number, invFreq: number) => number,
  inverse = false,
  out: Float64Array = new Float64Array(R * Hx * D), // (R, Hx, D)
): Float64Array {
  const half = D / 2;
  for (let r = 0; r < R; r++) {
    for (let i = 0; i < half; i++) {
      const a = angle(positions[r], invFreq[i]);
      const cos = Math.cos(a);
      const sin = inverse ? -Math.sin(a) : Math.sin(a);
      for (let h = 0; h < Hx; h++) {
        const base = (r * Hx + h) * D + i;
        const x1 = x[base];
        const x2 = x[base + half];
        out[base] = x1 * cos - x2 * sin;
        out[base + half] = x2 * cos + x1 * sin;
      }
    }
  }
  return out;
}

/** y (R, Hx, D) = rotate(x) (or the transposed rotation when `inverse`), f32 angles as the kernel. */
export function ropeRef(
  x: ArrayLike<number>, // (R, Hx, D)
  positions: ArrayLike<number>, // (R)
  R: number,
  Hx: number,
  D: number,
  theta: number,
  inverse = false,
): Float64Array {
  return ropeRotate(x, positions, R, Hx, D, ropeInvFreq(D, theta), ropeAngle, inverse);
}
