// rmsnorm_forward.wgsl — RMSNorm over rows as Llama/Qwen2 (HF LlamaRMSNorm), f32:
//   rstd[r] = 1 / sqrt(mean_c(x[r, c]²) + eps);   y[r, c] = (x[r, c] · rstd[r]) · w[c].
// rstd is kept for the backward pass (rmsnorm_backward, rmsnorm_backward_weight).
//
// Shapes (row-major): x (R, C); w (C); y (R, C); rstd (R).
// Bindings: 0 x, 1 w (read), 2 y, 3 rstd (read_write), 4 params (uniform).
// Dispatch: one workgroup of WG threads per row (any C: threads stride over the row), R workgroups
// laid out by splitGrid (row = wid.x + wid.y·nwg.x, tail rows return before any barrier; the row
// index is workgroup-uniform). WG must be a power of two: the sum of squares is a fixed-order tree
// reduction in workgroup memory, so the result is deterministic.
// ROW_PER_THREAD (barrier-free variant, KernelTuning.avoidBarriers): one invocation per row, WG rows
// per workgroup, ceil(R / WG) workgroups laid out by splitGrid; the sum runs in column order.
// rmsnorm_forward_subgroups.wgsl is this kernel with the row sum reduced by subgroup operations.
// No f16 variant: the sum of squares of a row overflows f16 (65,504) at |x| ~ 10 over
// 896 channels, and the kernel is bound by reading and writing f32 rows, which f16 arithmetic on
// the scale multiply would not shrink (only f16 activations in memory would).

#include "workgroup_sum.wgsl"
#include "rmsnorm_forward_kernel.wgsl"
