// logprob_triple.wgsl — included by the log-prob gather's kernel (logprob_gather_kernel.wgsl) and
// its workgroup reductions (workgroup_triple.wgsl, subgroup_triple.wgsl): the online
// (max, Σe, centred Σ, argmax) triple of temperature-scaled logits and the merge of two triples.
// The including kernel declares `logits` (array<f32>) and `params.invTemperature`.

const NEG_BIG: f32 = -3.0e38; // "−∞" that stays finite, so (m1 − m2) never makes NaN
const NO_ID: u32 = 0xffffffffu;

// Online: m = running max, s = Σ e^{x−m}, t = Σ e^{x−m}(x − m), over v = first, first + step, …;
// a = the lowest v where x = m (the argmax; NO_ID while no x exceeded NEG_BIG, e.g. all NaN).
struct Triple {
  m: f32,
  s: f32,
  t: f32,
  a: u32,
}

/** The triple that merges as a no-op (an idle thread's, an empty chunk's). */
fn empty_triple() -> Triple {
  return Triple(NEG_BIG, 0.0, 0.0, NO_ID);
}

// The triple of x = logits[base + v] · invT over v = first, first + step, … < end.
fn strided_triple(base: u32, first: u32, end: u32, step: u32) -> Triple {
  var m = NEG_BIG;
  var s = 0.0;
  var t = 0.0;
  var a = NO_ID;
  for (var v = first; v < end; v = v + step) {
    let x = logits[base + v] * params.invTemperature;
    if (x > m) {
      let c = exp(m - x);
      t = (t + (m - x) * s) * c;
      s = s * c + 1.0;
      m = x;
      a = v; // strictly greater: an equal later v keeps the earlier (lower) id
    } else {
      let e = exp(x - m);
      s = s + e;
      t = t + e * (x - m);
    }
  }
  return Triple(m, s, t, a);
}

fn merge(a: Triple, b: Triple) -> Triple {
  let mm = max(a.m, b.m);
  let c1 = exp(a.m - mm);
  let c2 = exp(b.m - mm);
  // The argmax: the side with the larger max, the lower id on a tie (NO_ID loses every min).
  var arg = min(a.a, b.a);
  if (a.m > b.m) { arg = a.a; } else if (b.m > a.m) { arg = b.a; }
  return Triple(mm, a.s * c1 + b.s * c2, (a.t + (a.m - mm) * a.s) * c1 + (b.t + (b.m - mm) * b.s) * c2,
                arg);
}
