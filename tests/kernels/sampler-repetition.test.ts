// The repetition penalty through batched generation (TRL repetition_penalty): the GPU Sampler's
// seen-token bitmap starts from each prompt's own tokens (not its left padding) and gains every
// drawn token, so greedy decoding equals the argmax of transformers' RepetitionPenaltyLogitsProcessor
// formula written out here over an independent full forward of prompt + completion so far; the CPU
// RefSampler draws the same tokens; penalty 1 is exactly no penalty.
import { describe, expect, it } from 'vitest';
import { GpuLlama } from '../../src/model/llama';
import { RefSampler } from '../../src/model/ref-sampler';
import { Sampler } from '../../src/model/sampler';
import { RefLlama } from '../../src/ref/llama';
import { loadFixture } from '../fixtures/load';
import { testEngine, worstMismatch } from './harness';

const fx = loadFixture('llama_gqa');
// Prompts of different lengths (left padding), with repeated ids.
const PROMPTS = [[5, 9, 12, 3, 9], [7], [20, 21], [33, 4, 8]];
const BASE = {
  maxNewTokens: 6,
  temperature: 1,
  topK: 0,
  topP: 1,
  seed: 11,
  stream: 0,
  eosTokenIds: [] as number[],
};

/** transformers: score = where(score < 0, score · p, score / p) at every id of input_ids. */
function hfPenalised(logits: ArrayLike<number>, ids: readonly number[], p: number): number[] {
  const out = Array.from(logits);
  for (const id of new Set(ids)) out[id] = out[id] < 0 ? out[id] * p : out[id] / p;
  return out;
}

describe('Sampler with repetitionPenalty', () => {
  it('greedy: each token is the argmax of the penalised logits of prompt + completion so far', async () => {
    const engine = await testEngine();
    const model = GpuLlama.load(engine, fx.config, fx.params);
    const sampler = new Sampler(engine, model);
    const ref = new RefLlama(fx.config, fx.params);
    const p = 3;
    const plain = await sampler.generate(PROMPTS, { ...BASE, greedy: true });
    const out = await sampler.generate(PROMPTS, { ...BASE, greedy: true, repetitionPenalty: p });
    expect(out.completions).not.toEqual(plain.completions);
    let checked = 0;
    let promptMattered = 0;
    for (let n = 0; n < PROMPTS.length; n++) {
      for (let j = 0; j < BASE.maxNewTokens; j++) {
        const prefix = [...PROMPTS[n], ...out.completions[n].slice(0, j)];
        const { logits } = ref.prefill(
          Uint32Array.from(prefix),
          1,
          prefix.length,
          new Uint32Array(1),
          prefix.length,
        );
        const penalised = hfPenalised(logits, prefix, p);
        const sorted = [...penalised].sort((a, b) => b - a);
        if (sorted[0] - sorted[1] < 1e-3) continue; // a near-tie may go either way in f32
        expect(out.completions[n][j], `sequence ${n} token ${j}`).toBe(
          penalised.indexOf(sorted[0]),
        );
        // Where penalising the completion alone would pick another token, the prompt counted.
        const completionOnly = hfPenalised(logits, out.completions[n].slice(0, j), p);
        if (completionOnly.indexOf(Math.max(...completionOnly)) !== out.completions[n][j])
          promptMattered++;
        // The log-prob stays the raw softmax's (TRL's old log-probs apply no processor).
        let m = -Infinity;
        for (const z of logits) m = Math.max(m, z);
        let s = 0;
        for (const z of logits) s += Math.exp(z - m);
        expect(out.logps[n][j]).toBeCloseTo(logits[out.completions[n][j]] - m - Math.log(s), 4);
        checked++;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(18);
    expect(promptMattered).toBeGreaterThan(0);
    model.destroy();
  });

  it('the CPU RefSampler draws the same tokens (greedy and sampled); penalty 1 is no penalty', async () => {
    const engine = await testEngine();
    const model = GpuLlama.load(engine, fx.config, fx.params);
    const sampler = new Sampler(engine, model);
    const cpu = new RefSampler(new RefLlama(fx.config, fx.params));
    for (const options of [
      { ...BASE, greedy: true, repetitionPenalty: 1.7 },
      { ...BASE, temperature: 0.8, repetitionPenalty: 0.6 },
    ]) {
      const gpuOut = await sampler.generate(PROMPTS, options);
      const cpuOut = await cpu.generate(PROMPTS, options);
      expect(cpuOut.completions).toEqual(gpuOut.completions);
      for (let n = 0; n < PROMPTS.length; n++) {
        expect(
          worstMismatch(cpuOut.logps[n], gpuOut.logps[n], { atol: 1e-4, rtol: 1e-4 }),
        ).toBeNull();
      }
    }
    const off = await sampler.generate(PROMPTS, BASE);
    const one = await sampler.generate(PROMPTS, { ...BASE, repetitionPenalty: 1 });
    expect(one.completions).toEqual(off.completions);
    expect(one.logps).toEqual(off.logps);
    model.destroy();
  });
});
