// rmsnorm_backward.wgsl — input gradient of y = x · rstd · w (rmsnorm_forward), f32:
//   s[r] = Σ_c dy[r, c] · w[c] · x[r, c]
//   dx[r, c] (+)= rstd[r] · (w[c] · dy[r, c] − x[r, c] · rstd[r]² · s[r] / C)
// (d rstd / d x_c = −rstd³ · x_c / C). `accumulate` adds into dx, so the residual-stream gradient
// can take this term directly. The weight gradient is rmsnorm_backward_weight.wgsl.
//
// Shapes (row-major): dy (R, C); x (R, C); w (C); rstd (R) from the forward; dx (R, C).
// Bindings: 0 dy, 1 x, 2 w, 3 rstd (read), 4 dx (read_write), 5 params (uniform).
// Dispatch: one workgroup of WG threads per row, R workgroups laid out by splitGrid (row =
// wid.x + wid.y·nwg.x, workgroup-uniform tail guard). WG must be a power of two: s is a fixed-order
// tree reduction in workgroup memory (deterministic).
// rmsnorm_backward_subgroups.wgsl is this kernel with the row sum reduced by subgroup operations.
// No f16 variant: s = Σ dy·w·x and the difference w·dy − x·rstd²·s/C cancel; in f16
// (11-bit mantissa) the input gradient would lose most of its digits, and the kernel is bound by
// its f32 reads and writes, not by arithmetic.

#include "workgroup_sum.wgsl"
#include "rmsnorm_backward_kernel.wgsl"
