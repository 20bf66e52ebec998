// Packs prompts and completions into the left-padded (N, T) layout every GPU pass uses: all
// prompts end at column P − 1, so every completion starts at column P and the logits that predict
// completion tokens are the contiguous columns P − 1 … P + L − 2 of each sequence.
//
// Legend: N sequences, P prompt width (longest prompt), L completion width, T = P + L columns.

export interface PackedBatch {
  N: number;
  /** Columns: P + L. */
  T: number;
  /** Prompt width: completions start at this column. */
  P: number;
  /** Completion width. */
  L: number;
  tokens: Uint32Array; // (N, T) left-padded with padId
  keyStart: Uint32Array; // (N) number of left-pad columns = first valid column
  positions: Uint32Array; // (N, T) rotary position ids: column − keyStart (0 on pad columns)
  targets: Uint32Array; // (N, L) completion tokens (padId past the end)
  mask: Float32Array; // (N, L) 1 for completion tokens that count
}

export interface PackOptions {
  padId: number;
  /** Completion width L (defaults to the longest completion). */
  completionWidth?: number;
  /** Completions whose mask is all zero (truncated ones under maskTruncatedCompletions). */
  maskedOut?: ReadonlyArray<boolean>;
}

export function packBatch(
  prompts: ReadonlyArray<ArrayLike<number>>,
  completions: ReadonlyArray<ArrayLike<number>>,
  options: PackOptions,
): PackedBatch {
  const N = prompts.length;
  if (completions.length !== N) {
    throw new Error(`packBatch: ${N} prompts but ${completions.length} completions`);
  }
  if (N === 0) throw new Error('packBatch: empty batch');
  const P = Math.max(...prompts.map((p) => p.length));
  if (P === 0)
    throw new Error('packBatch: every prompt is empty; a prompt needs at least one token');
  const L = options.completionWidth ?? Math.max(1, ...completions.map((c) => c.length));
  const T = P + L;
  const tokens = new Uint32Array(N * T).fill(options.padId);
  const keyStart = new Uint32Array(N);
  const positions = new Uint32Array(N * T);
  const targets = new Uint32Array(N * L).fill(options.padId);
  const mask = new Float32Array(N * L);
  for (let n = 0; n < N; n++) {
    const prompt = prompts[n];
    const completion = completions[n];
    if (prompt.length === 0) throw new Error(`packBatch: prompt ${n} is empty`);
    if (completion.length > L) {
      throw new Error(
        `packBatch: completion ${n} has ${completion.length} tokens, more than the width ${L}`,
      );
    }
    const start = P - prompt.length;
    keyStart[n] = start;
    for (let i = 0; i < prompt.length; i++) tokens[n * T + start + i] = prompt[i];
    for (let i = 0; i < completion.length; i++) {
      tokens[n * T + P + i] = completion[i];
      targets[n * L + i] = completion[i];
      mask[n * L + i] = options.maskedOut?.[n] ? 0 : 1;
    }
    for (let col = start; col < T; col++) positions[n * T + col] = col - start;
  }
  return { N, T, P, L, tokens, keyStart, positions, targets, mask };
}
