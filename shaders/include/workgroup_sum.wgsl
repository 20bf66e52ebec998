// workgroup_sum.wgsl — included by rmsnorm_forward.wgsl, rmsnorm_backward.wgsl, sumsq.wgsl and
// grad_clip.wgsl (the shader loader's #include, src/engine/shaders.ts; subgroup_sum.wgsl is the
// same function with subgroup operations): the sum of one f32 per
// thread over the workgroup, as a fixed-order tree in workgroup memory, so the result is
// deterministic. The including kernel declares the override WG (a power of two). Every thread of
// the workgroup must call it (it has barriers), from workgroup-uniform control flow; each gets the
// total. Called once per kernel invocation: a second call could overwrite `partial` before a
// slow thread had read the first total.

var<workgroup> partial: array<f32, WG>;

fn workgroup_sum(thread: u32, value: f32) -> f32 {
  partial[thread] = value;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
    if (thread < stride) { partial[thread] = partial[thread] + partial[thread + stride]; }
    workgroupBarrier();
  }
  return partial[0];
}
