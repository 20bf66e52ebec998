// attention_stage_kv.wgsl — included by attention_forward.wgsl and attention_backward_dq.wgsl (the
// shader loader's #include, src/engine/shaders.ts): both stage the same key/value tiles, and read
// a tile's keys and values either from the staged tile (main) or straight from storage
// (main_direct). The including kernel declares the workgroup arrays k_tile and v_tile
// (TILE · D4 vec4 each) and the overrides WG, TILE and D4; the gathers come from
// attention_gather.wgsl.

#include "attention_gather.wgsl"

// Keys j0 … j0 + TILE − 1 of one (sequence, kv head) into k_tile / v_tile, zero from key_end on.
// The WG threads of the workgroup share the TILE · D4 slots; `thread` is this one's index.
fn stage_kv_tile(thread: u32, j0: u32, key_end: u32, kv_base: u32, kv_row_stride: u32) {
  for (var slot = thread; slot < TILE * D4; slot = slot + WG) {
    let j = j0 + slot / D4;
    var kx = vec4<f32>();
    var vx = vec4<f32>();
    if (j < key_end) {
      kx = gather_k(kv_base + j * kv_row_stride, slot % D4);
      vx = gather_v(kv_base + j * kv_row_stride, slot % D4);
    }
    k_tile[slot] = kx;
    v_tile[slot] = vx;
  }
}

// Vector c of key/value t of the tile at j0: from the staged tile, or straight from storage
// (`row` = the key's first element); keys past key_end are zero, as in the staged tile.
fn tile_key(staged: bool, row: u32, valid: bool, t: u32, c: u32) -> vec4<f32> {
  if (staged) { return k_tile[t * D4 + c]; }
  if (!valid) { return vec4<f32>(); }
  return gather_k(row, c);
}

fn tile_value(staged: bool, row: u32, valid: bool, t: u32, c: u32) -> vec4<f32> {
  if (staged) { return v_tile[t * D4 + c]; }
  if (!valid) { return vec4<f32>(); }
  return gather_v(row, c);
}
