// sample.wgsl — draws one token per row of logits with repetition penalty, temperature, top-k,
// top-p, min-p or greedy, and writes its log-prob under the full tempered softmax of the raw
// logits (TRL's sampling-policy "old" log-probs: its forward pass applies no sampling processor).
//
//   repetition penalty (HF's RepetitionPenaltyLogitsProcessor, before the warpers; penalty 1 off):
//           z' = z < 0 ? z · penalty : z · f32(1/penalty) for every token id set in the row's
//           `seen` bitmap (the prompt's and the completion's tokens so far), z' = z elsewhere;
//           the chosen token's bit is set after the draw, so the next step penalises it.
//   x = z' · invTemperature;  logp = (z · invTemperature − max) − log Σ exp(… − max) (raw z)
//   greedy: tok = argmax z' (lowest index on ties)
//   else:   keep x with key(x) ≥ τ, τ = the k-th largest key (top-k, k = 0 off), raised to the
//           largest key u with mass(key ≥ u) ≥ p · mass(top-k set) (top-p, p ≥ 1 off);
//           then min-p (minP > 0, HF's MinPLogitsWarper after top-p): keep only exp(x − max) ≥ minP,
//           an upper set in key order, so τ is raised to its k-th largest key, k its size;
//           tok = first kept index (in index order) whose cumulative exp(x − max) exceeds
//           u · Σ kept, u ∈ [0, 1) from Philox-4x32-10(counter (step, sequence, 0, 0), key seed).
// key() maps f32 to an order-preserving u32. Both thresholds are found without sorting: bit by bit
// from the top (32 steps), each step one counting (top-k) or mass (top-p) reduction over V, so the
// result is exact for counts and ties stay together. Filtering costs nothing when it is off.
// src/ref/sampling.ts and src/ref/rng.ts are the CPU mirror (same uniform → same token).
//
// Shapes: logits (N, V) f32; tokens, logps written at [row · outStride + outOffset] (u32, f32);
// seen (N, seenWords) u32 bitmap, bit v % 32 of word v / 32 (read and written only when the
// penalty is on; a 4-byte placeholder otherwise).
// Bindings: 0 logits (read), 1 tokens, 2 logps, 3 seen (read_write), 4 params (uniform).
// Dispatch (entry point main): one workgroup of WG threads per row, N workgroups laid out by
// splitGrid (flat index wid.x + wid.y · nwg.x). All reductions are fixed-order trees; no atomics.
// Entry point main_row_per_thread (CPU-emulated adapters, small V): one thread per row, WG rows a
// workgroup, the same steps as loops in one thread and no barrier (SwiftShader runs a barrier as a
// switch between the workgroup's threads: the tree version spent ~7 ms a call on a 69-token
// vocabulary). Same semantics; the softmax sums run in index order instead of trees, so log-probs
// agree with main to rounding; the inverse CDF repeats main's chunked arithmetic, so the token is
// main's (top-p's threshold could differ only where a mass sum ties p · mass within rounding).
// On the GPU path a row longer than KernelTuning.sampleChunk without top-k, top-p and min-p is
// not drawn here but by many workgroups: sample_split.wgsl, then sample_combine.wgsl.

override WG: u32 = 256; // a power of two (tree reduction)

struct Params {
  N: u32,
  V: u32,
  invTemperature: f32,
  topK: u32,
  topP: f32,
  greedy: u32,
  seedLo: u32,
  seedHi: u32,
  step: u32,
  sequenceOffset: u32,
  outStride: u32,
  outOffset: u32,
  minP: f32, // 0 = off
  repetitionPenalty: f32, // 1 = off
  invRepetitionPenalty: f32, // f32(1 / repetitionPenalty)
  seenWords: u32, // u32 words per row of `seen`: ceil(V / 32)
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> tokens: array<u32>;
@group(0) @binding(2) var<storage, read_write> logps: array<f32>;
@group(0) @binding(3) var<storage, read_write> seen: array<u32>;
@group(0) @binding(4) var<uniform> params: Params;

const NEG_BIG: f32 = -3.0e38;

var<workgroup> red_a: array<f32, WG>;
var<workgroup> red_b: array<f32, WG>;
var<workgroup> red_c: array<f32, WG>;
var<workgroup> red_u: array<u32, WG>;
var<workgroup> red_d: array<f32, WG>;

// First word of this invocation's row in `seen` (set once at the top of each entry point).
var<private> seen_base: u32;

fn order_key(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

#include "philox.wgsl"

// ---- fixed-order workgroup reductions (every thread gets the total) ----
fn sum_f32(lid: u32, value: f32) -> f32 {
  red_a[lid] = value;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
    if (lid < stride) { red_a[lid] = red_a[lid] + red_a[lid + stride]; }
    workgroupBarrier();
  }
  let total = red_a[0];
  workgroupBarrier();
  return total;
}

fn sum_u32(lid: u32, value: u32) -> u32 {
  red_u[lid] = value;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
    if (lid < stride) { red_u[lid] = red_u[lid] + red_u[lid + stride]; }
    workgroupBarrier();
  }
  let total = red_u[0];
  workgroupBarrier();
  return total;
}

#include "sample_logits.wgsl"

// Marks the chosen token as seen for the next step (one invocation per row writes its row).
fn mark_seen(tok: u32) {
  if (params.repetitionPenalty != 1.0) {
    seen[seen_base + tok / 32u] = seen[seen_base + tok / 32u] | (1u << (tok % 32u));
  }
}

// exp(x − m) of a kept token, 0 otherwise. One function for the chunk sums and the walk, so both
// compute the same bits.
fn kept_weight(base: u32, v: u32, m: f32, tau: u32) -> f32 {
  let x = x_sel(base, v);
  return select(0.0, exp(x - m), order_key(x) >= tau);
}

fn mass_at_least(lid: u32, base: u32, m: f32, tau: u32) -> f32 {
  var acc = 0.0;
  for (var v = lid; v < params.V; v = v + WG) { acc = acc + kept_weight(base, v, m, tau); }
  return sum_f32(lid, acc);
}

// Pass 1 over v = first, first + step, …: online max m and Σ exp(x − m) of the raw tempered
// logits, the max m_sel of the penalised ones (= m when the penalty is off) and the first index
// of the largest penalised z (best_i = 0xffffffff when there is no v).
struct FirstPass {
  m: f32,
  s: f32,
  best_z: f32,
  best_i: u32,
  m_sel: f32,
}

fn first_pass(base: u32, first: u32, step: u32) -> FirstPass {
  var m = NEG_BIG;
  var s = 0.0;
  var best_z = NEG_BIG;
  var best_i = 0xffffffffu;
  var m_sel = NEG_BIG;
  for (var v = first; v < params.V; v = v + step) {
    let x = x_at(base, v);
    if (x > m) {
      s = s * exp(m - x) + 1.0;
      m = x;
    } else {
      s = s + exp(x - m);
    }
    let z = z_sel(base, v);
    m_sel = max(m_sel, z * params.invTemperature);
    if (z > best_z || best_i == 0xffffffffu) { best_z = z; best_i = v; } // ascending v: first max
  }
  return FirstPass(m, s, best_z, best_i, m_sel);
}

// How many of v = first, first + step, … pass min-p: exp(x − m) ≥ minP.
fn count_min_p(base: u32, first: u32, step: u32, m: f32) -> u32 {
  var count = 0u;
  for (var v = first; v < params.V; v = v + step) {
    count = count + select(0u, 1u, exp(x_sel(base, v) - m) >= params.minP);
  }
  return count;
}

// How many of v = first, first + step, … have key(x) ≥ tau.
fn count_at_least(base: u32, first: u32, step: u32, tau: u32) -> u32 {
  var count = 0u;
  for (var v = first; v < params.V; v = v + step) {
    count = count + select(0u, 1u, order_key(x_sel(base, v)) >= tau);
  }
  return count;
}

// The token of chunk c where the kept weights' running sum first exceeds `rest` (what is left of
// u · total after the chunks before c); the chunk's last kept token if rounding never gets there.
fn walk_chunk(base: u32, c: u32, chunk: u32, m: f32, tau: u32, rest: f32) -> u32 {
  var acc = 0.0;
  var pick = 0xffffffffu;
  var last_kept = 0xffffffffu;
  for (var v = c * chunk; v < min(c * chunk + chunk, params.V); v = v + 1u) {
    let w = kept_weight(base, v, m, tau);
    if (w > 0.0) { last_kept = v; }
    acc = acc + w;
    if (acc > rest) { pick = v; break; }
  }
  return select(pick, last_kept, pick == 0xffffffffu);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= params.N) { return; } // uniform per workgroup
  let V = params.V;
  let base = row * V;
  seen_base = row * params.seenWords;

  // Pass 1: online max / Σ exp of x (the full tempered softmax), max and argmax of the penalised.
  let own = first_pass(base, lid, WG);
  let m = own.m;
  let s = own.s;
  let best_z = own.best_z;
  let best_i = own.best_i;
  red_a[lid] = m;
  red_b[lid] = s;
  red_c[lid] = best_z;
  red_u[lid] = best_i;
  red_d[lid] = own.m_sel;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
    if (lid < stride) {
      let m1 = red_a[lid];
      let m2 = red_a[lid + stride];
      let mm = max(m1, m2);
      red_b[lid] = red_b[lid] * exp(m1 - mm) + red_b[lid + stride] * exp(m2 - mm);
      red_a[lid] = mm;
      red_d[lid] = max(red_d[lid], red_d[lid + stride]);
      let z2 = red_c[lid + stride];
      let i2 = red_u[lid + stride];
      let z1 = red_c[lid];
      let i1 = red_u[lid];
      // Threads with no element carry index 0xffffffff and lose every comparison.
      if (i2 != 0xffffffffu && (i1 == 0xffffffffu || z2 > z1 || (z2 == z1 && i2 < i1))) {
        red_c[lid] = z2;
        red_u[lid] = i2;
      }
    }
    workgroupBarrier();
  }
  let max_x = red_a[0];
  let log_s = log(red_b[0]);
  let argmax_z = red_u[0];
  let max_sel = red_d[0];
  workgroupBarrier();

  var chosen = argmax_z;
  if (params.greedy == 0u) {
    // Top-k: the largest key τ with count(key ≥ τ) ≥ k is exactly the k-th largest key.
    var tau = 0u;
    if (params.topK > 0u && params.topK < V) {
      for (var bit = 31; bit >= 0; bit = bit - 1) {
        let cand = tau | (1u << u32(bit));
        if (sum_u32(lid, count_at_least(base, lid, WG, cand)) >= params.topK) { tau = cand; }
      }
    }
    // Top-p: the largest key with mass(key ≥ τ) ≥ p · mass(top-k set); never below the top-k τ.
    if (params.topP < 1.0) {
      let mass_goal = params.topP * mass_at_least(lid, base, max_sel, tau);
      var tau_p = 0u;
      for (var bit = 31; bit >= 0; bit = bit - 1) {
        let cand = tau_p | (1u << u32(bit));
        if (mass_at_least(lid, base, max_sel, cand) >= mass_goal) { tau_p = cand; }
      }
      tau = max(tau, tau_p);
    }
    if (params.minP > 0.0) {
      // Min-p keeps an upper set of keys: its threshold is its k-th largest key (as top-k).
      let k = sum_u32(lid, count_min_p(base, lid, WG, max_sel));
      var tau_m = 0u;
      for (var bit = 31; bit >= 0; bit = bit - 1) {
        let cand = tau_m | (1u << u32(bit));
        if (sum_u32(lid, count_at_least(base, lid, WG, cand)) >= k) { tau_m = cand; }
      }
      tau = max(tau, tau_m);
    }

    // Inverse CDF in index order: thread t sums the kept weights of its contiguous chunk, thread 0
    // finds the chunk holding u · total, then walks it.
    let chunk = (V + WG - 1u) / WG;
    let start = lid * chunk;
    let end = min(start + chunk, V);
    var local_sum = 0.0;
    for (var v = start; v < end; v = v + 1u) { local_sum = local_sum + kept_weight(base, v, max_sel, tau); }
    red_b[lid] = local_sum;
    workgroupBarrier();
    if (lid == 0u) {
      let r = philox4x32(vec4<u32>(params.step, params.sequenceOffset + row, 0u, 0u),
                         vec2<u32>(params.seedLo, params.seedHi));
      let u = uniform_from_bits(r.x);
      var total = 0.0;
      for (var t = 0u; t < WG; t = t + 1u) { total = total + red_b[t]; }
      // Residual form: compare each chunk (and then each token) against what is left of the target.
      var rest = u * total;
      var c = WG;
      var last_c = WG;
      for (var t = 0u; t < WG; t = t + 1u) {
        let chunk_mass = red_b[t];
        if (chunk_mass > 0.0) { last_c = t; }
        if (chunk_mass > rest) { c = t; break; }
        rest = rest - chunk_mass;
      }
      if (c == WG) { c = last_c; rest = 3.0e38; } // rounding put the target past the end
      red_u[0] = walk_chunk(base, c, chunk, max_sel, tau, rest);
    }
    workgroupBarrier();
    chosen = red_u[0];
  }

  if (lid == 0u) {
    let out = row * params.outStride + params.outOffset;
    tokens[out] = chosen;
    logps[out] = (x_at(base, chosen) - max_x) - log_s;
    mark_seen(chosen); // every thread's reads of `seen` ended at the barrier above
  }
}

// ---- one thread per row (no barriers) ----
// main's workgroup size for this V: the number of chunks its inverse CDF walks.
override CHUNKS: u32 = 256;

// Σ kept weights of chunk t, summed as main's thread t sums it.
fn chunk_mass(base: u32, t: u32, chunk: u32, m: f32, tau: u32) -> f32 {
  var acc = 0.0;
  for (var v = t * chunk; v < min(t * chunk + chunk, params.V); v = v + 1u) {
    acc = acc + kept_weight(base, v, m, tau);
  }
  return acc;
}

fn mass_at_least_serial(base: u32, m: f32, tau: u32) -> f32 {
  var acc = 0.0;
  for (var v = 0u; v < params.V; v = v + 1u) { acc = acc + kept_weight(base, v, m, tau); }
  return acc;
}

@compute @workgroup_size(WG)
fn main_row_per_thread(@builtin(workgroup_id) wid: vec3<u32>,
                       @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lid: u32) {
  let row = (wid.x + wid.y * nwg.x) * WG + lid;
  if (row >= params.N) { return; }
  let V = params.V;
  let base = row * V;
  seen_base = row * params.seenWords;

  // Pass 1, as main's threads do it, over the whole row.
  let pass1 = first_pass(base, 0u, 1u);
  let m = pass1.m;
  let s = pass1.s;
  let best_i = pass1.best_i;
  let max_x = m;
  let max_sel = pass1.m_sel;
  let log_s = log(s);

  var chosen = best_i;
  if (params.greedy == 0u) {
    var tau = 0u;
    if (params.topK > 0u && params.topK < V) {
      for (var bit = 31; bit >= 0; bit = bit - 1) {
        let cand = tau | (1u << u32(bit));
        if (count_at_least(base, 0u, 1u, cand) >= params.topK) { tau = cand; }
      }
    }
    if (params.topP < 1.0) {
      let mass_goal = params.topP * mass_at_least_serial(base, max_sel, tau);
      var tau_p = 0u;
      for (var bit = 31; bit >= 0; bit = bit - 1) {
        let cand = tau_p | (1u << u32(bit));
        if (mass_at_least_serial(base, max_sel, cand) >= mass_goal) { tau_p = cand; }
      }
      tau = max(tau, tau_p);
    }
    if (params.minP > 0.0) {
      let k = count_min_p(base, 0u, 1u, max_sel);
      var tau_m = 0u;
      for (var bit = 31; bit >= 0; bit = bit - 1) {
        let cand = tau_m | (1u << u32(bit));
        if (count_at_least(base, 0u, 1u, cand) >= k) { tau_m = cand; }
      }
      tau = max(tau, tau_m);
    }
    // Inverse CDF in index order, in main's CHUNKS chunks and with its arithmetic (chunk sums,
    // their total, the residual walk), so the token is main's whenever tau is.
    let chunk = (V + CHUNKS - 1u) / CHUNKS;
    var total = 0.0;
    for (var t = 0u; t < CHUNKS; t = t + 1u) { total = total + chunk_mass(base, t, chunk, max_sel, tau); }
    let r = philox4x32(vec4<u32>(params.step, params.sequenceOffset + row, 0u, 0u),
                       vec2<u32>(params.seedLo, params.seedHi));
    var rest = uniform_from_bits(r.x) * total;
    var c = CHUNKS;
    var last_c = CHUNKS;
    for (var t = 0u; t < CHUNKS; t = t + 1u) {
      let mass = chunk_mass(base, t, chunk, max_sel, tau);
      if (mass > 0.0) { last_c = t; }
      if (mass > rest) { c = t; break; }
      rest = rest - mass;
    }
    if (c == CHUNKS) { c = last_c; rest = 3.0e38; } // rounding put the target past the end
    chosen = walk_chunk(base, c, chunk, max_sel, tau, rest);
  }

  let out = row * params.outStride + params.outOffset;
  tokens[out] = chosen;
  logps[out] = (x_at(base, chosen) - max_x) - log_s;
  mark_seen(chosen);
}
