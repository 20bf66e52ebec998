// rmsnorm_forward_subgroups.wgsl — rmsnorm_forward.wgsl (the same outputs, bindings and dispatch; see its
// header) with the row's sum reduced by subgroup operations (include/subgroup_sum.wgsl: one
// barrier instead of log2 WG). For adapters with the `subgroups` feature, on the GPU path
// (src/kernels/rmsnorm.ts picks it). Agrees with rmsnorm_forward.wgsl to f32 rounding; reproducible on
// one device, not bit-identical across devices or subgroup sizes.
enable subgroups;

#include "subgroup_sum.wgsl"
#include "rmsnorm_forward_kernel.wgsl"
