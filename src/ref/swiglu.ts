// CPU reference for shaders/swiglu_forward.wgsl and shaders/swiglu_backward.wgsl, in f64.
// Elementwise over (R, I).

const sigmoid = (g: number) => 1 / (1 + Math.exp(-g));

/** h = silu(gate) · up. */
export function swigluForwardRef(gate: ArrayLike<number>, up: ArrayLike<number>): Float64Array {
  const h = new Float64Array(gate.length);
  for (let i = 0; i < h.length; i++) h[i] = gate[i] * sigmoid(gate[i]) * up[i];
  return h;
}

/** dgate and dup from dh (all (R, I)). */
export function swigluBackwardRef(
  dh: ArrayLike<number>,
  gate: ArrayLike<number>,
  up: ArrayLike<number>,
): { dgate: Float64Array; dup: Float64Array } {
  const dgate = new Float64Array(gate.length);
  const dup = new Float64Array(gate.length);
  for (let i = 0; i < gate.length; i++) {
    const g = gate[i];
    const s = sigmoid(g);
    dup[i] = dh[i] * g * s;
    dgate[i] = dh[i] * up[i] * s * (1 + g * (1 - s));
  }
  return { dgate, dup };
}
