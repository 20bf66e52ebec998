// subgroup_sum.wgsl — workgroup_sum() of workgroup_sum.wgsl (same signature and contract: every
// thread calls it once, from workgroup-uniform control flow, and gets the workgroup's total) with
// subgroup operations: one barrier instead of log2 WG. Included by rmsnorm_forward_subgroups.wgsl
// and rmsnorm_backward_subgroups.wgsl, which open with `enable subgroups;`. Correct for any
// subgroup size and any assignment of invocations to subgroups:
//  1. each subgroup sums its lanes (subgroupAdd);
//  2. the subgroup's lowest thread index (subgroupMin, unique per subgroup) stores that sum in its
//     own slot of workgroup memory, every other thread stores 0 in its slot;
//  3. after the barrier every subgroup sums all WG slots the same way: lane j (its rank,
//     subgroupExclusiveAdd) adds slots j, j + n, … (n = lanes), then subgroupAdd.
// Every subgroup's step 3 covers all WG slots whatever its n, so each gets the full total; they
// get the same bits when all have n lanes (the usual case: subgroup sizes and WG are powers of
// two, so the size divides WG or the workgroup is one partial subgroup); a driver that left a
// subgroup in the middle partial would give its threads the total rounded in another order.
// Deterministic on one device and driver; not bit-identical to the tree (f32 rounding apart).
// The includer declares the override WG (a power of two).

var<workgroup> partial: array<f32, WG>;

fn workgroup_sum(thread: u32, value: f32) -> f32 {
  let sum = subgroupAdd(value);
  partial[thread] = select(0.0, sum, thread == subgroupMin(thread));
  workgroupBarrier();
  let lanes = subgroupAdd(1u);
  var acc = 0.0;
  for (var j = subgroupExclusiveAdd(1u); j < WG; j = j + lanes) { acc = acc + partial[j]; }
  return subgroupAdd(acc);
}
