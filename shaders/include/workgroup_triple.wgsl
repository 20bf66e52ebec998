// workgroup_triple.wgsl — included by logprob_gather.wgsl: the merge of one log-prob triple
// (logprob_triple.wgsl) per thread over the workgroup, as a fixed-order tree in workgroup memory
// (log2 WG barriers), so results are bit-reproducible on every device. subgroup_triple.wgsl is the
// same function with subgroup operations. The includer declares the override WG (a power of two).
// Every thread must call it from workgroup-uniform control flow, once per invocation; each gets
// the merged triple.

#include "logprob_triple.wgsl"

var<workgroup> sh_m: array<f32, WG>;
var<workgroup> sh_s: array<f32, WG>;
var<workgroup> sh_t: array<f32, WG>;
var<workgroup> sh_a: array<u32, WG>;

fn workgroup_triple(lid: u32, own: Triple) -> Triple {
  sh_m[lid] = own.m;
  sh_s[lid] = own.s;
  sh_t[lid] = own.t;
  sh_a[lid] = own.a;
  workgroupBarrier();

  for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
    if (lid < stride) {
      let merged = merge(Triple(sh_m[lid], sh_s[lid], sh_t[lid], sh_a[lid]),
                         Triple(sh_m[lid + stride], sh_s[lid + stride], sh_t[lid + stride],
                                sh_a[lid + stride]));
      sh_m[lid] = merged.m;
      sh_s[lid] = merged.s;
      sh_t[lid] = merged.t;
      sh_a[lid] = merged.a;
    }
    workgroupBarrier();
  }
  return Triple(sh_m[0], sh_s[0], sh_t[0], sh_a[0]);
}
