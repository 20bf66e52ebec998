// The completions/* metrics of a sampled batch, as TRL's GRPOTrainer logs them
// (`_generate_and_score_completions`): lengths count the completion's tokens up to and including
// its first EOS; a completion is terminated when it emitted EOS, truncated (clipped) when it hit
// maxCompletionLength without one. With no terminated completion TRL logs 0 for the three
// terminated-length statistics (it takes them over a single zero). docs/grpo.md §6.

/** completions/mean_length … max_terminated_length of N completions. */
export function completionMetrics(
  lengths: readonly number[], // (N) completion tokens, EOS included
  finished: readonly boolean[], // (N) ended with EOS
): Record<string, number> {
  const N = lengths.length;
  if (N === 0 || finished.length !== N) {
    throw new RangeError(
      `completionMetrics needs N ≥ 1 lengths and as many flags (${N}, ${finished.length})`,
    );
  }
  const terminated = lengths.filter((_, i) => finished[i]);
  const total = lengths.reduce((s, l) => s + l, 0);
  return {
    'completions/mean_length': total / N,
    'completions/min_length': Math.min(...lengths),
    'completions/max_length': Math.max(...lengths),
    'completions/clipped_ratio': (N - terminated.length) / N,
    'completions/mean_terminated_length': terminated.length
      ? terminated.reduce((s, l) => s + l, 0) / terminated.length
      : 0,
    'completions/min_terminated_length': terminated.length ? Math.min(...terminated) : 0,
    'completions/max_terminated_length': terminated.length ? Math.max(...terminated) : 0,
  };
}
