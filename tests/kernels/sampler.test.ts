// Batched generation with the KV cache: greedy decoding equals the argmax of a full forward over
// the same tokens, seeded sampling is reproducible, and EOS ends a sequence.
import { describe, expect, it } from 'vitest';
import { readF32 } from '../../src/engine/buffers';
import { packBatch } from '../../src/model/batch';
import { GpuLlama } from '../../src/model/llama';
import { RefSampler } from '../../src/model/ref-sampler';
import { Sampler } from '../../src/model/sampler';
import { RefLlama } from '../../src/ref/llama';
import { loadFixture } from '../fixtures/load';
import { testEngine, worstMismatch } from './harness';

const fx = loadFixture('llama_gqa');
const V = fx.config.vocabSize;
// Prompts of different lengths, so left padding and per-row positions are exercised.
const PROMPTS = [[5, 9, 12, 3], [7], [20, 21], [33, 4, 8]];
const BASE = {
  maxNewTokens: 6,
  temperature: 1,
  topK: 0,
  topP: 1,
  seed: 11,
  stream: 0,
  eosTokenIds: [] as number[],
};

async function setup() {
  const engine = await testEngine();
  const model = GpuLlama.load(engine, fx.config, fx.params);
  return { engine, model, sampler: new Sampler(engine, model) };
}

describe('Sampler', () => {
  it('greedy generation equals the argmax of a full forward over the same tokens', async () => {
    const { engine, model, sampler } = await setup();
    const out = await sampler.generate(PROMPTS, { ...BASE, greedy: true });
    expect(out.completions.every((c) => c.length === 6)).toBe(true);
    expect(out.finished).toEqual([false, false, false, false]);
    // Score prompt + completion in one training-style forward and take the argmax of each column.
    const batch = packBatch(PROMPTS, out.completions, { padId: 0 });
    const gpuBatch = model.uploadBatch(
      batch.tokens,
      batch.keyStart,
      batch.positions,
      batch.N,
      batch.T,
    );
    let logitsBuf: GPUBuffer | null = null;
    await engine.run(async (enc) => {
      logitsBuf = model.forward(enc, gpuBatch, { start: batch.P - 1, count: batch.L }).logits;
    });
    const logits = await readF32(engine.device, logitsBuf!, batch.N * batch.L * V);
    let checked = 0;
    for (let n = 0; n < batch.N; n++) {
      for (let j = 0; j < batch.L; j++) {
        const row = logits.subarray((n * batch.L + j) * V, (n * batch.L + j + 1) * V);
        const sorted = Array.from(row).sort((a, b) => b - a);
        if (sorted[0] - sorted[1] < 1e-4) continue; // a near-tie may go either way in f32
        expect(out.completions[n][j], `sequence ${n} token ${j}`).toBe(row.indexOf(sorted[0]));
        checked++;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(20);
    // Greedy log-probs are those of the argmax under the tempered softmax: the largest of the row.
    expect(out.logps.every((lp) => lp.every((v) => v <= 0 && v > -Math.log(V)))).toBe(true);
    model.destroy();
  });

  it('seeded sampling is reproducible, and another stream draws differently', async () => {
    const { model, sampler } = await setup();
    const a = await sampler.generate(PROMPTS, BASE);
    const b = await sampler.generate(PROMPTS, BASE);
    const c = await sampler.generate(PROMPTS, { ...BASE, stream: 1 });
    expect(b.completions).toEqual(a.completions);
    expect(b.logps).toEqual(a.logps);
    expect(c.completions).not.toEqual(a.completions);
    model.destroy();
  });

  it('stops each sequence at its first EOS and reports which ones finished', async () => {
    const { model, sampler } = await setup();
    const greedy = await sampler.generate(PROMPTS, { ...BASE, greedy: true });
    // Declare the third greedy token of sequence 0 an EOS: sequence 0 must end right there.
    const eos = greedy.completions[0][2];
    const out = await sampler.generate(PROMPTS, {
      ...BASE,
      greedy: true,
      eosTokenIds: [eos],
      checkEvery: 2,
    });
    expect(out.completions[0]).toEqual(
      greedy.completions[0].slice(0, greedy.completions[0].indexOf(eos) + 1),
    );
    expect(out.finished[0]).toBe(true);
    for (let n = 0; n < PROMPTS.length; n++) {
      const first = greedy.completions[n].indexOf(eos);
      expect(out.completions[n]).toEqual(
        first >= 0 ? greedy.completions[n].slice(0, first + 1) : greedy.completions[n],
      );
      expect(out.logps[n].length).toBe(out.completions[n].length);
    }
    model.destroy();
  });

  it('a group shares one prefill: the same bits as prefilling every copy, in fewer bytes', async () => {
    const { engine, model, sampler } = await setup();
    // Two prompts of different lengths, each repeated three times and interleaved, as a GRPO
    // step's B prompts × G completions (plus one single prompt).
    const group = [
      PROMPTS[0],
      PROMPTS[2],
      PROMPTS[0],
      PROMPTS[2],
      PROMPTS[0],
      PROMPTS[2],
      PROMPTS[1],
    ];
    const run = async (sharedPrefill: boolean) => {
      engine.memory.resetPeak();
      const before = engine.memory.liveBytes;
      const out = await sampler.generate(group, { ...BASE, sharedPrefill });
      return { out, peak: engine.memory.peakBytes - before };
    };
    const each = await run(false);
    const shared = await run(true);
    expect(shared.out.completions).toEqual(each.out.completions);
    expect(shared.out.logps.map((l) => Array.from(l))).toEqual(
      each.out.logps.map((l) => Array.from(l)),
    );
    // Copies of a prompt draw their own tokens (the RNG is keyed by sequence), so a group differs.
    expect(
      new Set(shared.out.completions.filter((_, n) => n % 2 === 0 && n < 6).map(String)).size,
    ).toBeGreaterThan(1);
    // Greedy too, where copies must agree exactly with each other.
    const greedy = await sampler.generate(group, { ...BASE, greedy: true });
    expect(greedy.completions[2]).toEqual(greedy.completions[0]);
    expect(Array.from(greedy.logps[4])).toEqual(Array.from(greedy.logps[0]));
    model.destroy();
    // Fresh models so that neither run finds the other's workspace grown: the prefill's decoder
    // scratch is 3 prompts × P rows instead of 7 × P.
    const bytes = async (sharedPrefill: boolean) => {
      const m = GpuLlama.load(engine, fx.config, fx.params);
      const s = new Sampler(engine, m);
      await s.generate(group, { ...BASE, maxNewTokens: 1, sharedPrefill });
      const held = m.workspaceBytes;
      m.destroy();
      return held;
    };
    expect(await bytes(true)).toBeLessThan(await bytes(false));
  });
});

describe('RefSampler (CPU fallback)', () => {
  it('generates the same greedy tokens as the GPU sampler and honours EOS', async () => {
    const { model, sampler } = await setup();
    const cpu = new RefSampler(new RefLlama(fx.config, fx.params));
    const gpuOut = await sampler.generate(PROMPTS, { ...BASE, greedy: true });
    const cpuOut = await cpu.generate(PROMPTS, { ...BASE, greedy: true });
    expect(cpuOut.completions).toEqual(gpuOut.completions);
    for (let n = 0; n < PROMPTS.length; n++) {
      expect(
        worstMismatch(cpuOut.logps[n], gpuOut.logps[n], { atol: 1e-4, rtol: 1e-4 }),
      ).toBeNull();
    }
    const eos = gpuOut.completions[1][1];
    const stopped = await cpu.generate(PROMPTS, { ...BASE, greedy: true, eosTokenIds: [eos] });
    expect(stopped.completions[1]).toEqual(
      gpuOut.completions[1].slice(0, gpuOut.completions[1].indexOf(eos) + 1),
    );
    expect(stopped.finished[1]).toBe(true);
    model.destroy();
  });
});
