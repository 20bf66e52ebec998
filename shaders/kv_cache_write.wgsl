// kv_cache_write.wgsl — copies new key (or value) rows into a KV cache at column offset t0, f32.
//
// Shapes (row-major):
//   src   (N, Tsrc, Hkv, D)   the k or v projections of Tsrc new tokens per sequence
//   cache (N, S_cap, Hkv, D)  cache[n, t0 + t] = src[n, t] for t < Tsrc; other columns untouched
// The caller guarantees t0 + Tsrc ≤ S_cap (the wrapper checks it).
// Bindings: 0 src (read); 1 cache (read_write); 2 params (uniform).
// Dispatch: dispatch1D(N · Tsrc · Hkv · D, WG); flat thread index = (wid.x + wid.y·nwg.x)·WG + lid.x.

override WG: u32 = 256;

struct Params {
  N: u32,
  Tsrc: u32,
  S_cap: u32,
  rowSize: u32, // Hkv · D
  t0: u32,
}

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> cache: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(WG, 1, 1)
fn main(
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
) {
  let index = (wid.x + wid.y * nwg.x) * WG + lid.x;
  let per_sequence = params.Tsrc * params.rowSize;
  if (index >= params.N * per_sequence) { return; }
  let n = index / per_sequence;
  let within = index % per_sequence; // t · rowSize + (kv head, d)
  cache[(n * params.S_cap + params.t0) * params.rowSize + within] = src[index];
}
