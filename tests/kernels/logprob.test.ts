// shaders/logprob_gather.wgsl and logprob_gather_backward.wgsl against src/ref/logprob.ts on a shape
// sweep (temperature-scaled), large logits, huge vocabularies, accumulation, and the cross-entropy
// built from them; every forward variant (one thread per row, a workgroup per row, many workgroups
// per row; tree or subgroup merge, logprob_gather_subgroups.wgsl) forced through KernelTuning.
import { describe, expect, it } from 'vitest';
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../../src/engine/buffers';
import { CrossEntropyKernel, crossEntropyRowWeights } from '../../src/kernels/cross-entropy';
import {
  LOGPROB_BACKWARD_WG,
  LOGPROB_GATHER_VARIANTS,
  LOGPROB_GATHER_WG,
  LOGPROB_ROW_PER_THREAD_MAX_V,
  LOGPROB_SPLIT_CHUNK,
  LogprobGatherBackwardKernel,
  LogprobGatherKernel,
  logprobGatherPlan,
  logprobRowPerThread,
  runLogprobGather,
} from '../../src/kernels/logprob';
import { crossEntropyRef, logprobGatherBackwardRef, logprobGatherRef } from '../../src/ref/logprob';
import type { KernelTuning } from '../../src/engine/pipelines';
import {
  BARRIER_VARIANTS,
  seededUniform,
  testEngine,
  testEngineWith,
  worstMismatch,
  type Tolerance,
} from './harness';

// f32 online softmax over up to 150k terms vs f64: relative error of the sum ~1e-6.
const FORWARD_TOLERANCE: Tolerance = { atol: 2e-5, rtol: 2e-5 };
// p = exp(x − lse) with an f32 exponent error ~1e-6 gives ~1e-6 relative error in each gradient.
const GRADIENT_TOLERANCE: Tolerance = { atol: 1e-6, rtol: 1e-4 };
// |z| ~ 1e4: one f32 ulp of the logits themselves is ~1e-3, so that is all we can ask for.
const LARGE_LOGIT_TOLERANCE: Tolerance = { atol: 4e-3, rtol: 1e-4 };

// The GPU path's forward variants, forced (avoidBarriers false) so they run on SwiftShader too.
const GPU: KernelTuning = { avoidBarriers: false, vectorLoads: true };
const TREE: KernelTuning = { ...GPU, subgroups: false, logprobChunk: 0 };
const SUBGROUPS: KernelTuning = { ...GPU, subgroups: true, logprobChunk: 0 };
const FORWARD_VARIANTS: Array<{ name: string; tuning: KernelTuning; needsSubgroups?: boolean }> = [
  { name: 'workgroup per row, tree', tuning: TREE },
  { name: 'workgroup per row, subgroups', tuning: SUBGROUPS, needsSubgroups: true },
  { name: 'split 64 per workgroup, tree', tuning: { ...TREE, logprobChunk: 64 } },
  {
    name: 'split 64 per workgroup, subgroups',
    tuning: { ...SUBGROUPS, logprobChunk: 64 },
    needsSubgroups: true,
  },
];

function seededTargets(R: number, V: number, seed: number): Uint32Array {
  const u = seededUniform(R, seed, 0, 1);
  return Uint32Array.from(u, (x) => Math.min(V - 1, Math.floor(x * V)));
}

async function runGather(
  logits: Float32Array,
  targets: Uint32Array,
  R: number,
  V: number,
  invTemperature: number,
  g?: Float32Array,
  accumulateInto?: Float32Array,
  maxWorkgroupsPerDim?: number,
  tuning?: KernelTuning,
) {
  const engine = await (tuning ? testEngineWith(tuning) : testEngine());
  const d = engine.device;
  const logitsBuf = uploadStorageBuffer(d, logits);
  const targetsBuf = uploadStorageBuffer(d, targets);
  const logp = createStorageBuffer(d, R * 4);
  const entropy = createStorageBuffer(d, R * 4);
  const lse = createStorageBuffer(d, R * 4);
  const correct = createStorageBuffer(d, R * 4);
  const gBuf = g ? uploadStorageBuffer(d, g) : null;
  const dz = g
    ? accumulateInto
      ? uploadStorageBuffer(d, accumulateInto)
      : createStorageBuffer(d, R * V * 4)
    : null;
  const fwd = new LogprobGatherKernel(d, engine.pipelines);
  const bwd = new LogprobGatherBackwardKernel(d, engine.pipelines);
  await engine.run(async (enc) => {
    fwd.encode(enc, {
      logits: logitsBuf,
      targets: targetsBuf,
      logp,
      entropy,
      lse,
      correct,
      R,
      V,
      invTemperature,
    });
    if (gBuf && dz) {
      bwd.encode(enc, {
        logits: logitsBuf,
        targets: targetsBuf,
        lse,
        gradLogp: gBuf,
        dLogits: dz,
        R,
        V,
        invTemperature,
        accumulate: !!accumulateInto,
        maxWorkgroupsPerDim,
      });
    }
  });
  const out = {
    logp: await readF32(d, logp, R),
    entropy: await readF32(d, entropy, R),
    lse: await readF32(d, lse, R),
    correct: await readF32(d, correct, R),
    dz: dz ? await readF32(d, dz, R * V) : null,
  };
  for (const b of [logitsBuf, targetsBuf, logp, entropy, lse, correct, gBuf, dz]) b?.destroy();
  return out;
}

const SHAPES: Array<[number, number]> = [
  [1, 1],
  [1, 7],
  [3, LOGPROB_GATHER_WG], // exactly one stride of the workgroup
  [5, LOGPROB_GATHER_WG + 1], // one past it
  [13, 997], // primes
  [31, 4099], // larger, prime vocabulary
];

describe('logprob_gather.wgsl', () => {
  for (const [R, V] of SHAPES) {
    for (const temperature of [1, 0.7]) {
      it(`R=${R} V=${V} T=${temperature}: forward and backward match the reference`, async () => {
        const seed = R * 7919 + V;
        const logits = seededUniform(R * V, seed, -4, 4);
        const targets = seededTargets(R, V, seed + 1);
        const g = seededUniform(R, seed + 2, -1, 1);
        if (R > 2) g[1] = 0; // a masked row: its gradient must be exactly 0
        const gpu = await runGather(logits, targets, R, V, 1 / temperature, g);
        const ref = logprobGatherRef(logits, targets, R, V, 1 / temperature);
        expect(worstMismatch(gpu.logp, ref.logp, FORWARD_TOLERANCE)).toBeNull();
        expect(worstMismatch(gpu.entropy, ref.entropy, FORWARD_TOLERANCE)).toBeNull();
        expect(worstMismatch(gpu.lse, ref.lse, FORWARD_TOLERANCE)).toBeNull();
        expect(Array.from(gpu.correct)).toEqual(Array.from(ref.correct));
        const dzRef = logprobGatherBackwardRef(logits, targets, g, R, V, 1 / temperature);
        expect(worstMismatch(gpu.dz!, dzRef, GRADIENT_TOLERANCE)).toBeNull();
        if (V > 1) {
          expect(ref.entropy.some((h) => h > 1e-2)).toBe(true);
          expect(dzRef.some((x) => Math.abs(x) > 1e-4)).toBe(true);
        }
        if (R > 2) for (let v = 0; v < V; v++) expect(gpu.dz![V + v]).toBe(0);
      });
    }
  }

  it('hand-worked row: z = [0, ln 3], target 1', async () => {
    // softmax = [1/4, 3/4]: logp = ln(3/4), entropy = −(¼ ln ¼ + ¾ ln ¾), lse = ln 4.
    // dz with g = 1: [0 − 1/4, 1 − 3/4] = [−0.25, 0.25].
    const gpu = await runGather(
      new Float32Array([0, Math.log(3)]),
      new Uint32Array([1]),
      1,
      2,
      1,
      new Float32Array([1]),
    );
    expect(gpu.logp[0]).toBeCloseTo(Math.log(0.75), 6);
    expect(gpu.entropy[0]).toBeCloseTo(-(0.25 * Math.log(0.25) + 0.75 * Math.log(0.75)), 6);
    expect(gpu.lse[0]).toBeCloseTo(Math.log(4), 6);
    expect(gpu.dz![0]).toBeCloseTo(-0.25, 6);
    expect(gpu.dz![1]).toBeCloseTo(0.25, 6);
  });

  it('stays finite and accurate with |z| up to 1e4', async () => {
    const R = 4;
    const V = 333;
    const logits = seededUniform(R * V, 5, -1e4, 1e4);
    logits[0 * V + 17] = 1e4; // a dominant target, logp ≈ 0
    logits[1 * V + 3] = -1e4; // a hopeless target, logp ≈ −2e4
    const targets = new Uint32Array([17, 3, 100, 332]);
    const gpu = await runGather(logits, targets, R, V, 1, new Float32Array([1, 1, 1, 1]));
    const ref = logprobGatherRef(logits, targets, R, V, 1);
    for (const x of [...gpu.logp, ...gpu.entropy, ...gpu.lse, ...gpu.dz!])
      expect(Number.isFinite(x)).toBe(true);
    expect(worstMismatch(gpu.logp, ref.logp, LARGE_LOGIT_TOLERANCE)).toBeNull();
    expect(worstMismatch(gpu.entropy, ref.entropy, LARGE_LOGIT_TOLERANCE)).toBeNull();
    expect(worstMismatch(gpu.lse, ref.lse, LARGE_LOGIT_TOLERANCE)).toBeNull();
    const dzRef = logprobGatherBackwardRef(logits, targets, [1, 1, 1, 1], R, V, 1);
    expect(worstMismatch(gpu.dz!, dzRef, LARGE_LOGIT_TOLERANCE)).toBeNull();
  });

  it('a 150k vocabulary (loops over V) matches', async () => {
    const R = 2;
    const V = 150_001;
    const logits = seededUniform(R * V, 77, -6, 6);
    const targets = new Uint32Array([0, V - 1]);
    const gpu = await runGather(logits, targets, R, V, 1 / 0.9);
    const ref = logprobGatherRef(logits, targets, R, V, 1 / 0.9);
    expect(worstMismatch(gpu.logp, ref.logp, FORWARD_TOLERANCE)).toBeNull();
    expect(worstMismatch(gpu.entropy, ref.entropy, FORWARD_TOLERANCE)).toBeNull();
    expect(worstMismatch(gpu.lse, ref.lse, FORWARD_TOLERANCE)).toBeNull();
  });

  it('split grids: rows and elements past the first grid row (grid limit lowered to 7)', async () => {
    // 65535 workgroups per dimension cannot be exceeded in a fast SwiftShader test; a lowered
    // limit exercises the same 2-D layout, flat-index recovery and tail guard.
    const R = 45;
    const V = 129;
    const logits = seededUniform(R * V, 21, -2, 2);
    const targets = seededTargets(R, V, 22);
    const g = seededUniform(R, 23, -1, 1);
    const gpu = await runGather(logits, targets, R, V, 1, g, undefined, 7);
    const ref = logprobGatherRef(logits, targets, R, V, 1);
    expect(worstMismatch(gpu.logp, ref.logp, FORWARD_TOLERANCE)).toBeNull();
    expect(worstMismatch(gpu.entropy, ref.entropy, FORWARD_TOLERANCE)).toBeNull();
    const dzRef = logprobGatherBackwardRef(logits, targets, g, R, V, 1);
    expect(worstMismatch(gpu.dz!, dzRef, GRADIENT_TOLERANCE)).toBeNull();
  });

  it('backward accumulates into an existing gradient', async () => {
    const R = 7;
    const V = 301;
    const logits = seededUniform(R * V, 3, -3, 3);
    const targets = seededTargets(R, V, 4);
    const g = seededUniform(R, 5, -2, 2);
    const init = seededUniform(R * V, 6, -1, 1);
    const gpu = await runGather(logits, targets, R, V, 1.25, g, init);
    const ref = logprobGatherBackwardRef(logits, targets, g, R, V, 1.25, init);
    expect(worstMismatch(gpu.dz!, ref, GRADIENT_TOLERANCE)).toBeNull();
  });

  it('correct: 1 exactly where the target is the argmax, a tie going to the lowest id (torch.argmax)', async () => {
    // V = 300 puts the tied ids 2 and V − 2 in different threads of the 256-wide tree, so the
    // merge's tie rule is what decides; both entry points (cooperative, one thread per row).
    for (const V of [7, 300]) {
      for (const { tuning } of BARRIER_VARIANTS) {
        const R = 6;
        const logits = seededUniform(R * V, V, -2, 2);
        const row = (r: number) => logits.subarray(r * V, (r + 1) * V);
        const argmax0 = row(0).indexOf(Math.max(...row(0)));
        for (const r of [2, 3]) {
          row(r)[2] = 3; // above every other logit (they lie in [−2, 2))
          row(r)[V - 2] = 3;
        }
        row(4).fill(0.5);
        row(5).fill(0.5);
        const targets = new Uint32Array([argmax0, (argmax0 + 1) % V, 2, V - 2, 0, 1]);
        const gpu = await runGather(
          logits,
          targets,
          R,
          V,
          1 / 0.7,
          undefined,
          undefined,
          undefined,
          tuning,
        );
        expect(Array.from(gpu.correct)).toEqual([1, 0, 1, 0, 1, 0]);
        expect(Array.from(logprobGatherRef(logits, targets, R, V, 1 / 0.7).correct)).toEqual([
          1, 0, 1, 0, 1, 0,
        ]);
      }
    }
  });
});

describe('logprob_gather.wgsl: one thread per row vs a workgroup per row', () => {
  it('the barrier-free tuning takes it up to the vocabulary limit only', () => {
    const [cooperative, free] = BARRIER_VARIANTS.map((v) => v.tuning);
    expect(logprobRowPerThread(69, free)).toBe(true);
    expect(logprobRowPerThread(LOGPROB_ROW_PER_THREAD_MAX_V, free)).toBe(true);
    expect(logprobRowPerThread(LOGPROB_ROW_PER_THREAD_MAX_V + 1, free)).toBe(false);
    expect(logprobRowPerThread(69, cooperative)).toBe(false);
  });

  it('gives bit-identical logp, entropy and lse (it replays the same tree)', async () => {
    const free = BARRIER_VARIANTS[1].tuning;
    const cooperative = TREE; // the workgroup-memory tree (a subgroup merge rounds differently)
    for (const V of [1, 7, 69, 129, 449, 4096]) {
      for (const invTemperature of [1, 1 / 0.7]) {
        const R = 37; // not a multiple of the 4 rows per workgroup
        const logits = seededUniform(R * V, V + 3, -5, 5);
        const targets = seededTargets(R, V, V + 4);
        const run = (tuning: KernelTuning) =>
          runGather(logits, targets, R, V, invTemperature, undefined, undefined, undefined, tuning);
        const tree = await run(cooperative);
        const rows = await run(free);
        expect(Array.from(rows.logp), `V=${V} logp`).toEqual(Array.from(tree.logp));
        expect(Array.from(rows.entropy), `V=${V} entropy`).toEqual(Array.from(tree.entropy));
        expect(Array.from(rows.lse), `V=${V} lse`).toEqual(Array.from(tree.lse));
      }
    }
  });
});

describe('logprob_gather forward variants (GPU path, forced)', () => {
  it('the plan: split only on the GPU path past the chunk, subgroups only where the device has them', () => {
    expect(logprobGatherPlan(151_936, GPU, true)).toEqual({
      kind: 'split',
      wg: LOGPROB_GATHER_WG,
      subgroups: true,
      chunk: LOGPROB_SPLIT_CHUNK,
      parts: Math.ceil(151_936 / LOGPROB_SPLIT_CHUNK),
    });
    expect(logprobGatherPlan(151_936, GPU, false)).toMatchObject({
      kind: 'split',
      subgroups: false,
    });
    expect(logprobGatherPlan(LOGPROB_SPLIT_CHUNK, GPU, true)).toMatchObject({ kind: 'workgroup' });
    expect(logprobGatherPlan(151_936, { ...GPU, logprobChunk: 0 }, true).kind).toBe('workgroup');
    expect(logprobGatherPlan(97, { ...GPU, subgroups: false }, true)).toEqual({
      kind: 'workgroup',
      wg: 128,
      subgroups: false,
    });
    // The emulation path keeps its kernels: one thread per row, or the tree without split.
    const emulation = BARRIER_VARIANTS[1].tuning;
    expect(logprobGatherPlan(449, emulation, true).kind).toBe('row-per-thread');
    expect(logprobGatherPlan(151_936, emulation, true)).toMatchObject({
      kind: 'workgroup',
      subgroups: false,
    });
  });

  for (const { name, tuning, needsSubgroups } of FORWARD_VARIANTS) {
    for (const [R, V] of [
      [3, 1],
      [4, 3],
      [5, 97],
      [3, 4099],
    ] as const) {
      it(`${name}: R=${R} V=${V} T=0.7 matches the reference, the same bits on a second call`, async (ctx) => {
        const engine = await testEngineWith(tuning);
        if (needsSubgroups && !engine.device.features.has('subgroups')) {
          ctx.skip(`the adapter has no 'subgroups' feature (${name} not run)`);
        }
        const plan = new LogprobGatherKernel(engine.device, engine.pipelines).plan(V);
        if (needsSubgroups) expect(plan).toMatchObject({ subgroups: true });
        if (tuning.logprobChunk && V > tuning.logprobChunk) expect(plan.kind).toBe('split');
        const seed = R * 104729 + V;
        const logits = seededUniform(R * V, seed, -4, 4);
        const targets = seededTargets(R, V, seed + 1);
        if (V > 64) targets[0] = V - 1; // a target in the last (partial) part
        const run = () =>
          runGather(logits, targets, R, V, 1 / 0.7, undefined, undefined, undefined, tuning);
        const gpu = await run();
        const ref = logprobGatherRef(logits, targets, R, V, 1 / 0.7);
        expect(worstMismatch(gpu.logp, ref.logp, FORWARD_TOLERANCE)).toBeNull();
        expect(worstMismatch(gpu.entropy, ref.entropy, FORWARD_TOLERANCE)).toBeNull();
        expect(worstMismatch(gpu.lse, ref.lse, FORWARD_TOLERANCE)).toBeNull();
        expect(Array.from(gpu.correct)).toEqual(Array.from(ref.correct));
        const again = await run();
        expect(Array.from(again.logp)).toEqual(Array.from(gpu.logp));
        expect(Array.from(again.entropy)).toEqual(Array.from(gpu.entropy));
      });
    }
  }

  it('1000 entries per workgroup (V = 4099: 5 parts, the last of 99) with subgroups matches', async () => {
    const tuning = { ...SUBGROUPS, logprobChunk: 1000 };
    const [R, V] = [3, 4099];
    const logits = seededUniform(R * V, 98, -4, 4);
    const targets = new Uint32Array([V - 1, 999, 1000]); // each side of a part boundary
    const gpu = await runGather(logits, targets, R, V, 1, undefined, undefined, undefined, tuning);
    const ref = logprobGatherRef(logits, targets, R, V, 1);
    expect(worstMismatch(gpu.logp, ref.logp, FORWARD_TOLERANCE)).toBeNull();
    expect(worstMismatch(gpu.entropy, ref.entropy, FORWARD_TOLERANCE)).toBeNull();
    expect(worstMismatch(gpu.lse, ref.lse, FORWARD_TOLERANCE)).toBeNull();
  });

  it('one entry per workgroup (chunk 1, V = 97: 97 parts a row) matches', async () => {
    const tuning = { ...TREE, logprobChunk: 1 };
    const [R, V] = [3, 97];
    const logits = seededUniform(R * V, 99, -4, 4);
    const targets = seededTargets(R, V, 100);
    const gpu = await runGather(logits, targets, R, V, 1, undefined, undefined, undefined, tuning);
    const ref = logprobGatherRef(logits, targets, R, V, 1);
    expect(worstMismatch(gpu.logp, ref.logp, FORWARD_TOLERANCE)).toBeNull();
    expect(worstMismatch(gpu.entropy, ref.entropy, FORWARD_TOLERANCE)).toBeNull();
    expect(Array.from(gpu.correct)).toEqual(Array.from(ref.correct));
  });

  it('a 150k vocabulary split at the default chunk, subgroups (as a GPU runs Qwen) matches', async () => {
    const R = 2;
    const V = 150_001;
    const logits = seededUniform(R * V, 77, -6, 6);
    const targets = new Uint32Array([0, V - 1]);
    const gpu = await runGather(
      logits,
      targets,
      R,
      V,
      1 / 0.9,
      undefined,
      undefined,
      undefined,
      GPU,
    );
    const ref = logprobGatherRef(logits, targets, R, V, 1 / 0.9);
    expect(worstMismatch(gpu.logp, ref.logp, FORWARD_TOLERANCE)).toBeNull();
    expect(worstMismatch(gpu.entropy, ref.entropy, FORWARD_TOLERANCE)).toBeNull();
    expect(worstMismatch(gpu.lse, ref.lse, FORWARD_TOLERANCE)).toBeNull();
  });

  it('split and subgroup merges stay finite and accurate with |z| up to 1e4', async () => {
    const R = 4;
    const V = 333;
    const logits = seededUniform(R * V, 5, -1e4, 1e4);
    logits[0 * V + 17] = 1e4;
    logits[1 * V + 3] = -1e4;
    const targets = new Uint32Array([17, 3, 100, 332]);
    const ref = logprobGatherRef(logits, targets, R, V, 1);
    for (const tuning of [SUBGROUPS, { ...SUBGROUPS, logprobChunk: 64 }]) {
      const gpu = await runGather(
        logits,
        targets,
        R,
        V,
        1,
        undefined,
        undefined,
        undefined,
        tuning,
      );
      for (const x of [...gpu.logp, ...gpu.entropy, ...gpu.lse])
        expect(Number.isFinite(x)).toBe(true);
      expect(worstMismatch(gpu.logp, ref.logp, LARGE_LOGIT_TOLERANCE)).toBeNull();
      expect(worstMismatch(gpu.entropy, ref.entropy, LARGE_LOGIT_TOLERANCE)).toBeNull();
    }
  });

  it('argmax ties across parts and subgroups go to the lowest id (torch.argmax)', async () => {
    // V = 300, chunk 64: the tied ids 2 and V − 2 lie in parts 0 and 4, and in different lanes.
    const V = 300;
    const R = 4;
    const logits = seededUniform(R * V, V, -2, 2);
    const row = (r: number) => logits.subarray(r * V, (r + 1) * V);
    for (const r of [0, 1]) {
      row(r)[2] = 3;
      row(r)[V - 2] = 3;
    }
    row(2).fill(0.5);
    row(3).fill(0.5);
    const targets = new Uint32Array([2, V - 2, 0, 1]);
    for (const { tuning } of FORWARD_VARIANTS) {
      const gpu = await runGather(
        logits,
        targets,
        R,
        V,
        1,
        undefined,
        undefined,
        undefined,
        tuning,
      );
      expect(Array.from(gpu.correct)).toEqual([1, 0, 1, 0]);
    }
  });

  it('runLogprobGather (for the GPU bench) runs a listed variant and reports its plan', async () => {
    const names = LOGPROB_GATHER_VARIANTS.map((v) => v.name);
    expect(new Set(names).size).toBe(names.length);
    const engine = await testEngine();
    // Two of the list (each compiles its own pipelines, which SwiftShader makes slow).
    for (const [name, kind] of [
      ['split-4096-subgroups', 'split'],
      ['workgroup-tree', 'workgroup'],
    ] as const) {
      const { tuning } = LOGPROB_GATHER_VARIANTS.find((v) => v.name === name)!;
      const { plan, msPerForward } = await runLogprobGather(engine, { R: 2, V: 5000 }, tuning, {
        iterations: 2,
      });
      expect(plan.kind, name).toBe(kind);
      expect(msPerForward.length, name).toBe(2);
      for (const ms of msPerForward) expect(ms, name).toBeGreaterThan(0);
    }
  });
});

describe('cross-entropy (gather kernels + matmul)', () => {
  it('masked mean of −logp and its logits gradient match the reference', async () => {
    const engine = await testEngine();
    const d = engine.device;
    const R = 23;
    const V = 517;
    const logits = seededUniform(R * V, 11, -5, 5);
    const targets = seededTargets(R, V, 12);
    const mask = Float32Array.from({ length: R }, (_, r) => (r % 4 === 0 ? 0 : 1));
    const rowWeights = crossEntropyRowWeights(mask);
    const buffers = {
      logits: uploadStorageBuffer(d, logits),
      targets: uploadStorageBuffer(d, targets),
      rowWeights: uploadStorageBuffer(d, rowWeights),
      loss: createStorageBuffer(d, 4),
      dLogits: createStorageBuffer(d, R * V * 4),
    };
    const kernel = new CrossEntropyKernel(d, engine.pipelines);
    await engine.run((enc) => kernel.encode(enc, { ...buffers, R, V, invTemperature: 1 }));
    const loss = (await readF32(d, buffers.loss, 1))[0];
    const dLogits = await readF32(d, buffers.dLogits, R * V);
    const ref = crossEntropyRef(logits, targets, mask, R, V, 1);
    expect(ref.loss).toBeGreaterThan(1); // ≈ ln V for random logits: a real value to compare
    expect(Math.abs(loss - ref.loss)).toBeLessThanOrEqual(1e-5 * Math.abs(ref.loss));
    expect(worstMismatch(dLogits, ref.dLogits, GRADIENT_TOLERANCE)).toBeNull();
    for (const b of Object.values(buffers)) b.destroy();
  });
});

/** Forward, then the backward with the entropy term (∂loss/∂H per row = gH). */
async function runEntropyBackward(
  logits: Float32Array,
  targets: Uint32Array,
  R: number,
  V: number,
  invTemperature: number,
  g: Float32Array,
  gH: Float32Array,
) {
  const engine = await testEngine();
  const d = engine.device;
  const bufs = {
    logits: uploadStorageBuffer(d, logits),
    targets: uploadStorageBuffer(d, targets),
    logp: createStorageBuffer(d, R * 4),
    entropy: createStorageBuffer(d, R * 4),
    lse: createStorageBuffer(d, R * 4),
    g: uploadStorageBuffer(d, g),
    gH: uploadStorageBuffer(d, gH),
    dz: createStorageBuffer(d, R * V * 4),
  };
  const fwd = new LogprobGatherKernel(d, engine.pipelines);
  const bwd = new LogprobGatherBackwardKernel(d, engine.pipelines);
  await engine.run((enc) => {
    fwd.encode(enc, { ...bufs, R, V, invTemperature });
    bwd.encode(enc, {
      logits: bufs.logits,
      targets: bufs.targets,
      lse: bufs.lse,
      gradLogp: bufs.g,
      entropyGrad: { entropy: bufs.entropy, gradEntropy: bufs.gH },
      dLogits: bufs.dz,
      R,
      V,
      invTemperature,
    });
  });
  const dz = await readF32(d, bufs.dz, R * V);
  for (const b of Object.values(bufs)) b.destroy();
  return dz;
}

// The entropy bonus's gradient (docs/grpo.md §5): ∂H/∂z_v = −invT · p_v (log p_v + H).
describe('logprob_gather_backward.wgsl entropy term', () => {
  it('hand-worked row: z = [0, ln 3], ∂loss/∂H = 1', async () => {
    // p = [¼, ¾], H = −(¼ ln ¼ + ¾ ln ¾) = 0.562335: ∂H/∂z = [−¼(ln ¼ + H), −¾(ln ¾ + H)]
    // = [0.205990, −0.205990] (they sum to 0: softmax is shift-invariant).
    const z = new Float32Array([0, Math.log(3)]);
    const H = -(0.25 * Math.log(0.25) + 0.75 * Math.log(0.75));
    const expected = [-0.25 * (Math.log(0.25) + H), -0.75 * (Math.log(0.75) + H)];
    const dz = await runEntropyBackward(
      z,
      new Uint32Array([1]),
      1,
      2,
      1,
      new Float32Array([0]),
      new Float32Array([1]),
    );
    const ref = logprobGatherBackwardRef(z, [1], [0], 1, 2, 1, undefined, [1]);
    for (const r of [dz, ref]) {
      expect(r[0]).toBeCloseTo(expected[0], 6);
      expect(r[1]).toBeCloseTo(expected[1], 6);
    }
    expect(expected[0]).toBeCloseTo(0.20599, 5);
  });

  it('reference: central differences of H match ∂H/∂z (T = 0.7)', () => {
    const R = 3;
    const V = 11;
    const invT = 1 / 0.7;
    const z = Array.from(seededUniform(R * V, 41, -3, 3));
    const targets = Array.from(seededTargets(R, V, 42));
    const gH = [0.7, -1.3, 0];
    const dz = logprobGatherBackwardRef(z, targets, [0, 0, 0], R, V, invT, undefined, gH);
    const h = 1e-6;
    const loss = (x: number[]) =>
      logprobGatherRef(x, targets, R, V, invT).entropy.reduce((s, e, r) => s + gH[r] * e, 0);
    for (let i = 0; i < R * V; i++) {
      const up = z.slice();
      const down = z.slice();
      up[i] += h;
      down[i] -= h;
      const numeric = (loss(up) - loss(down)) / (2 * h);
      expect(Math.abs(dz[i] - numeric)).toBeLessThanOrEqual(1e-8 + 1e-6 * Math.abs(numeric));
    }
  });

  for (const [R, V] of [
    [1, 1],
    [5, LOGPROB_BACKWARD_WG + 1],
    [13, 997],
  ] as const) {
    it(`R=${R} V=${V} T=0.7: logp and entropy terms together match the reference`, async () => {
      const seed = R * 31 + V;
      const logits = seededUniform(R * V, seed, -4, 4);
      const targets = seededTargets(R, V, seed + 1);
      const g = seededUniform(R, seed + 2, -1, 1);
      const gH = seededUniform(R, seed + 3, -1, 1);
      if (R > 2) gH[1] = 0; // a row with only the logp term
      if (R > 3) g[2] = 0; // a row with only the entropy term
      const gpu = await runEntropyBackward(logits, targets, R, V, 1 / 0.7, g, gH);
      const ref = logprobGatherBackwardRef(logits, targets, g, R, V, 1 / 0.7, undefined, gH);
      expect(worstMismatch(gpu, ref, GRADIENT_TOLERANCE)).toBeNull();
      if (V > 1) expect(ref.some((x) => Math.abs(x) > 1e-4)).toBe(true);
    });
  }
});
