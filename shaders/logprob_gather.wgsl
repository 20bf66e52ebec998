// logprob_gather.wgsl — per-row log-prob of a target token, entropy and log-sum-exp of the
// temperature-scaled logits x = z · invTemperature, in one pass over the vocabulary.
//
//   logp[r]    = x[r, o_r] − lse[r]
//   entropy[r] = −Σ_v p log p = log s − (Σ_v e^{x−m}(x − m)) / s      (p = softmax(x))
//   lse[r]     = m + log s,  m = max_v x, s = Σ_v e^{x−m}               (saved for the backward)
//
//   correct[r] = 1 if argmax_v x[r, v] = o_r else 0  (ties: the lowest id, as torch.argmax)
//
// Shapes: logits (R, V) f32, targets (R) u32, logp / entropy / lse / correct (R) f32.
// Bindings: 0 logits (read), 1 targets (read), 2 logp, 3 entropy, 4 lse (read_write), 5 params,
// 6 correct (read_write; SFT's mean_token_accuracy), used only by the *_correct entry points
// (main_correct, main_combine_correct, main_row_per_thread_correct): the others do not reference
// it, so their ('auto') layouts have no binding 6 and a caller that does not want `correct` binds
// nothing for it;
// 7 partials (read_write; (R, parts) triples), used only by main_split and main_combine*.
// Dispatch (main, main_correct): one workgroup of WG threads per row, R workgroups laid out by
// splitGrid (flat row index wid.x + wid.y · nwg.x). Threads stride over V keeping an online
// (max, sum, centred sum) triple, then merge the triples in a fixed tree order
// (include/workgroup_triple.wgsl), so results are bit-reproducible. Entropy is accumulated
// relative to the running max (never as lse − E[x]) so |z| ~ 1e4 loses no digits.
// Many workgroups per row (GPUs, long rows such as Qwen's 151,936-token vocabulary, where R
// workgroups would leave most of the GPU idle at small R): main_split runs R · parts workgroups
// (workgroup g = row · parts + p reduces entries [p · chunk, (p + 1) · chunk) into partials[g]),
// then main_combine (WG rows a workgroup, one thread per row) merges each row's parts against
// their common max in ascending order and writes the outputs. Deterministic; agrees with main to
// f32 rounding (a different merge order), not bit for bit.
// A target ≥ V gives logp = NaN (loud), never an out-of-bounds read.
// Entry point main_row_per_thread (CPU-emulated adapters, small V): one thread per row, WG rows a
// workgroup, no barrier (SwiftShader runs a barrier as a switch between the workgroup's threads:
// one call over 512 rows of a 69-token vocabulary took ~90 ms). It replays main's arithmetic with
// TREE = main's workgroup size for this V: TREE strided partial triples, merged in the same tree
// order, so its results are bit-identical to main's.
// logprob_gather_subgroups.wgsl is the same kernel with the workgroup merge done by subgroup
// operations. No f16 variant: Σ e^{x−m} over V terms reaches V (151,936 for Qwen) > 65,504, the
// largest f16, and 11-bit sums over 1e5 terms would be far outside the f32 tolerance the policy
// ratio needs; the kernel is bound by reading the f32 logits anyway, which f16 math does not shrink.

#include "workgroup_triple.wgsl"
#include "logprob_gather_kernel.wgsl"
