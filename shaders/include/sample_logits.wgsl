// sample_logits.wgsl — included by sample.wgsl, sample_split.wgsl and sample_combine.wgsl (the
// shader loader's #include): a row's logits as the sampling kernels see them. The including kernel
// declares `logits` (N, V) f32, the `seen` bitmap (N, seenWords) u32, `params` (struct Params with
// invTemperature, repetitionPenalty, invRepetitionPenalty) and the private `seen_base` (first word
// of the row in `seen`).

// Raw tempered logit: the log-prob's softmax.
fn x_at(base: u32, v: u32) -> f32 {
  return logits[base + v] * params.invTemperature;
}

// The logit after the repetition penalty (what greedy and the filters see).
fn z_sel(base: u32, v: u32) -> f32 {
  let z = logits[base + v];
  if (params.repetitionPenalty == 1.0) { return z; } // uniform: off costs one branch
  if (((seen[seen_base + v / 32u] >> (v % 32u)) & 1u) == 0u) { return z; }
  return select(z * params.invRepetitionPenalty, z * params.repetitionPenalty, z < 0.0);
}

// Penalised tempered logit: what top-k, top-p, min-p and the draw see.
fn x_sel(base: u32, v: u32) -> f32 {
  return z_sel(base, v) * params.invTemperature;
}
