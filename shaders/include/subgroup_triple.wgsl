// subgroup_triple.wgsl — included by logprob_gather_subgroups.wgsl (which must open with
// `enable subgroups;`): workgroup_triple() of workgroup_triple.wgsl with subgroup operations, one
// barrier instead of log2 WG. Correct for any subgroup size (4 on SwiftShader, 32 on NVIDIA, 64 on
// AMD wave64, …) and any assignment of invocations to subgroups:
//  1. each subgroup merges its lanes' triples at once: M = max m, S = Σ s·e^{m−M},
//     T = Σ (t + (m − M)·s)·e^{m−M}, argmax = the lowest id among lanes whose m = M;
//  2. the subgroup's lowest local index (subgroupMin, unique per subgroup) stores it in slot
//     [that index] of workgroup memory, every other thread stores the empty triple there;
//  3. after the one barrier every subgroup merges all WG slots the same way: lane j (its rank,
//     subgroupExclusiveAdd) folds slots j, j + n, … (n = lanes), then step 1 over its lanes.
// Every subgroup's step 3 covers all WG slots whatever its n, so each gets the full merge; they
// get the same bits when all have n lanes (subgroup sizes and WG are powers of two, so the size
// divides WG or the workgroup is one partial subgroup). The kernel only uses thread 0's anyway.
// Deterministic on a given device and driver (the subgroup ops' order is the hardware's, fixed),
// but not bit-identical to the tree of workgroup_triple.wgsl: results agree to f32 rounding.

#include "logprob_triple.wgsl"

var<workgroup> sh_triple: array<Triple, WG>;

fn subgroup_merge(own: Triple) -> Triple {
  let m = subgroupMax(own.m);
  let c = exp(own.m - m);
  let s = subgroupAdd(own.s * c);
  let t = subgroupAdd((own.t + (own.m - m) * own.s) * c);
  let a = subgroupMin(select(NO_ID, own.a, own.m == m));
  return Triple(m, s, t, a);
}

fn workgroup_triple(lid: u32, own: Triple) -> Triple {
  let mine = subgroup_merge(own);
  let first = subgroupMin(lid);
  if (lid == first) { sh_triple[lid] = mine; } else { sh_triple[lid] = empty_triple(); }
  workgroupBarrier();
  let lanes = subgroupAdd(1u);
  var acc = empty_triple();
  for (var j = subgroupExclusiveAdd(1u); j < WG; j = j + lanes) { acc = merge(acc, sh_triple[j]); }
  return subgroup_merge(acc);
}
