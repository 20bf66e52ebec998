// attention_rows.wgsl — included by attention_forward.wgsl and attention_backward_dq.wgsl (the
// shader loader's #include, src/engine/shaders.ts): which query row a thread owns, in the two
// layouts both kernels dispatch. The R = H / Hkv query heads of kv head g share its keys, so the
// R·Tq rows of a (sequence n, kv head g) pair are numbered r = i·R + (h − g·R): row r is query
// i = r / R of head h = g·R + r % R. The including kernel declares the override WG.

struct QueryRow {
  n: u32, // sequence
  g: u32, // kv head
  i: u32, // query (position in the query block)
  h: u32, // query head
}

fn query_row(n: u32, g: u32, r: u32, R: u32) -> QueryRow {
  return QueryRow(n, g, r / R, g * R + r % R);
}

// Entry point main: the WG rows of a workgroup belong to one (n, g) pair, so they can share a
// staged K/V tile. Workgroup `flat` serves rows first … first + WG − 1 of its pair (`blocks`
// workgroups per pair). Computed from the workgroup index alone, so every value is uniform
// across the workgroup (loop bounds around barriers may use them).
struct RowBlock {
  n: u32,
  g: u32,
  first: u32,
}

fn row_block(flat: u32, Hkv: u32, blocks: u32) -> RowBlock {
  return RowBlock(flat / (Hkv * blocks), (flat / blocks) % Hkv, (flat % blocks) * WG);
}

// Entry point main_direct (barrier-free): threads share nothing, so the rows of all pairs are
// packed densely, thread by thread (`rows` = R·Tq per pair).
fn packed_row(thread: u32, Hkv: u32, R: u32, rows: u32) -> QueryRow {
  return query_row(thread / (Hkv * rows), (thread / rows) % Hkv, thread % rows, R);
}
