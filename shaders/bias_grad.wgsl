// bias_grad.wgsl — bias gradient, f32: db[c] (+)= Σ_r dy[r, c]   (rows summed in ascending r:
// deterministic; `accumulate` adds into db across micro-batches).
//
// Shapes (row-major): dy (R, Cout); db (Cout).
// Bindings: 0 dy (read), 1 db (read_write), 2 params (uniform).
// Dispatch: one thread per channel (adjacent threads read adjacent columns of each row),
// ceil(Cout / WG) workgroups laid out by splitGrid (flat workgroup index wid.x + wid.y·nwg.x, tail
// guarded).

override WG: u32 = 256;

struct Params {
  rows: u32, // R
  channels: u32, // Cout
  accumulate: u32, // 1: db += Σ, 0: db = Σ
}

@group(0) @binding(0) var<storage, read> dy: array<f32>; // (R, Cout)
@group(0) @binding(1) var<storage, read_write> db: array<f32>; // (Cout)
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(WG)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let c = (wid.x + wid.y * nwg.x) * WG + lid.x;
  let C = params.channels;
  if (c >= C) { return; }
  var sum = 0.0;
  for (var r = 0u; r < params.rows; r = r + 1u) {
    sum = sum + dy[r * C + c];
  }
  if (params.accumulate != 0u) { sum = db[c] + sum; }
  db[c] = sum;
}
