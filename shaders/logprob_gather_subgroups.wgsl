// logprob_gather_subgroups.wgsl — logprob_gather.wgsl (the same outputs, bindings, entry points
// and dispatch; see its header) with each workgroup's merge of its threads' triples done by
// subgroup operations (include/subgroup_triple.wgsl: one barrier instead of log2 WG). For adapters
// with the `subgroups` feature, on the GPU path (src/kernels/logprob.ts picks it). Results agree
// with logprob_gather.wgsl to f32 rounding (the subgroup ops merge in the hardware's order), are
// reproducible on one device, and are not bit-identical across devices or subgroup sizes.
enable subgroups;

#include "subgroup_triple.wgsl"
#include "logprob_gather_kernel.wgsl"
