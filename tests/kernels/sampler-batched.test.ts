// Decoding several tokens per submission gives the same tokens and log-probs as before it did
// (issue 34 part 2). The sampler encodes up to checkEvery decode steps in one submission (rotary
// positions copied from a table on the GPU) and waits once per submission; tokensPerSubmit 1 puts
// every step in its own submission. Two checks: (1) every submission size and check interval gives
// exactly the bits of one token per submission, in this process; (2) the tokens equal, and the
// log-probs match, those the sampler produced before batching (captured from commit 48dd88a, one
// submit and wait per token, on SwiftShader; they matched bit for bit there, the tolerance only
// allows another CPU's SwiftShader to round differently).
import { describe, expect, it } from 'vitest';
import { GpuLlama } from '../../src/model/llama';
import { Sampler, type SampleOptions, type SampleResult } from '../../src/model/sampler';
import { loadFixture } from '../fixtures/load';
import { testEngine, worstMismatch } from './harness';

const fx = loadFixture('llama_gqa');
// Two prompts of different lengths, three copies each (a GRPO group: one shared prefill), and a
// single one.
const GROUP = [[5, 9, 12, 3], [20, 21], [5, 9, 12, 3], [20, 21], [5, 9, 12, 3], [20, 21], [7]];
const CASES = {
  // Ten EOS ids: every sequence ends before step 32, so generation stops at its 4th check.
  eos: {
    maxNewTokens: 40,
    temperature: 1,
    topK: 0,
    topP: 1,
    seed: 3,
    stream: 2,
    eosTokenIds: [2, 10, 11, 12, 13, 14, 15, 16, 17, 18],
  },
  // Every filter, and the repetition penalty's seen-token bitmap carried across submissions.
  filters: {
    maxNewTokens: 13,
    temperature: 0.8,
    topK: 10,
    topP: 0.9,
    minP: 0.05,
    repetitionPenalty: 1.3,
    seed: 5,
    stream: 1,
    eosTokenIds: [],
  },
} satisfies Record<string, SampleOptions>;

/** Sampler outputs before batching (captured, see the header). */
const GOLDEN: Record<keyof typeof CASES, { completions: number[][]; logpBits: string[] }> = {
  eos: {
    completions: [
      [
        59, 41, 30, 41, 59, 41, 52, 49, 52, 44, 45, 21, 41, 36, 6, 51, 51, 57, 44, 52, 53, 23, 47,
        52, 58, 41, 1, 42, 46, 11,
      ],
      [5, 32, 55, 54, 42, 13],
      [18],
      [40, 27, 38, 30, 22, 25, 22, 38, 33, 13],
      [60, 30, 59, 56, 24, 9, 59, 16],
      [25, 58, 35, 17],
      [
        20, 56, 45, 45, 46, 46, 42, 31, 52, 53, 31, 60, 50, 48, 60, 52, 51, 52, 43, 40, 59, 32, 42,
        17,
      ],
    ],
    logpBits: [
      [
        'c050446a bfb2c7c8 c0282330 bf849b2c c028772f bfd6b5eb c037255d c0a3cad3',
        'c0107108 c0307e50 c0901420 c09c0c4c c0406fe4 c032c113 c05ce8d0 c0b74f28',
        'c09c4e11 c07dcb42 c081a270 c0388f30 c05d600b c036fd29 c065dce8 c0592d48',
        'c08a9ffa c09955de c07c7b1d c04b6444 c0074def c02f17f8',
      ].join(' '),
      'c063e466 c0742855 c045c5a4 c079e54f c0b3a26e c04907d4',
      'c09e80f2',
      [
        'c0839aa4 c043bbe9 bfb0f8f5 c03ca5e4 c08e32a2 c00d1608 c0670223 bfcd265c',
        'c087eebe c00f73d3',
      ].join(' '),
      'c084af60 c0511880 c030a6d4 c079e118 c092814d c01a9f6c c0151e4e c0cbae82',
      'c082e442 c07dd6e5 c0978a22 c09e583e',
      [
        'c04c95ce bfe1ba29 bfdf5fcc c0309170 c024e524 bfe734e2 c009f614 c0858770',
        'c0305d6c c08e756f c00dd7d6 c05fcc3e c06f33b2 c0197dde c0734733 c0162ead',
        'c06bdb6a c057e31a c062d968 c067b64a c011b3d5 c0905079 c02b2422 c05cb4e1',
      ].join(' '),
    ],
  },
  filters: {
    completions: [
      [41, 59, 15, 31, 41, 59, 57, 59, 57, 60, 25, 53, 30],
      [37, 27, 41, 20, 27, 38, 27, 30, 36, 45, 24, 39, 35],
      [41, 59, 9, 56, 52, 27, 36, 45, 24, 27, 48, 38, 15],
      [37, 40, 13, 13, 41, 31, 38, 16, 37, 27, 27, 40, 50],
      [38, 41, 15, 48, 4, 59, 19, 39, 35, 36, 45, 49, 56],
      [38, 40, 52, 41, 46, 47, 40, 25, 39, 2, 11, 35, 37],
      [41, 13, 49, 46, 42, 46, 2, 11, 35, 9, 41, 45, 20],
    ],
    logpBits: [
      [
        'bef53875 bf8fff2b c040a414 c05a4511 bf57baef bfa9c885 c00960ae bfd623e5',
        'c0302bbe c0027d5e c039014a c0448f4f c03ab804',
      ].join(' '),
      [
        'c0317e6c bfafcddd bfde31e2 bff0da10 bfd696e4 c0074360 bfd5eeaf c04f2ca0',
        'c03c3eaa bfe29bb4 c05178e8 c058f2a6 bece26c0',
      ].join(' '),
      [
        'bef53875 bf8fff2b c03991ca c02f6daf c0577b21 c024cd9a bfa791e1 c0019e7a',
        'c0644636 bfbf849d bfe65f9f c05bbf52 c031e24c',
      ].join(' '),
      [
        'c0317e6c c00d72b6 c0244f70 c0203d12 c059aef0 c055a34c c0399e6c bf9ec074',
        'bfc251c3 c0000c4c bf6e3990 c055f58a bf800ceb',
      ].join(' '),
      [
        'c03b6de9 bf3d99e3 c0238488 c065dafd c042f82e bf7fd693 c06c6bc0 c040e352',
        'bff525df c007a217 bfc93a62 c04c90d8 c02eb2e0',
      ].join(' '),
      [
        'c00d2c6c c0294ac8 c0582742 c015eb74 bff92832 c059efdc c0257c9e bf539cee',
        'c01261b0 c01a5718 c0462d12 c0532682 c046838f',
      ].join(' '),
      [
        'c003b526 c009b85a c02fceb5 c00461fd c02c8e48 bfb33675 c0187653 c00f880c',
        'bfceb1f5 c04cb482 bfeb8d6f c065f5d4 c01a4496',
      ].join(' '),
    ],
  },
};

const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
const fromHex = (s: string) =>
  new Float32Array(Uint32Array.from(s.split(' '), (h) => parseInt(h, 16)).buffer);

describe('Sampler: several decode steps per submission', () => {
  it('batched decoding is bit-identical to one submission per token and to the pre-batching outputs', async () => {
    const engine = await testEngine();
    const model = GpuLlama.load(engine, fx.config, fx.params);
    const sampler = new Sampler(engine, model);
    for (const [name, options] of Object.entries(CASES) as [keyof typeof CASES, SampleOptions][]) {
      const run = async (extra: Partial<SampleOptions>) => {
        const before = engine.counters.snapshot().other;
        const out = await sampler.generate(GROUP, { ...options, ...extra });
        const after = engine.counters.snapshot().other;
        return { out, submits: after.submits - before.submits, waits: after.waits - before.waits };
      };
      const perToken = await run({ tokensPerSubmit: 1 });
      const same = (r: SampleResult, label: string) => {
        expect(r.completions, `${name} ${label}`).toEqual(perToken.out.completions);
        expect(r.finished, `${name} ${label}`).toEqual(perToken.out.finished);
        expect(r.logps.map(bits), `${name} ${label}`).toEqual(perToken.out.logps.map(bits));
      };
      const batched = await run({});
      same(batched.out, 'default (8 steps per submission)');
      for (const extra of [{ checkEvery: 3 }, { checkEvery: 64, tokensPerSubmit: 5 }])
        same((await run(extra)).out, JSON.stringify(extra));
      // One submission per token, and one per 8 (plus the prefill's) with the default.
      const steps = Math.max(...batched.out.completions.map((c) => c.length));
      const decodeSteps = name === 'eos' ? 32 : steps; // eos: stopped at the check after step 32
      expect(perToken.submits, name).toBe(decodeSteps);
      expect(batched.submits, name).toBe(1 + Math.ceil((decodeSteps - 1) / 8));
      expect(batched.waits, name).toBe(Math.ceil(decodeSteps / 8));
      // The outputs of the code before batching.
      const golden = GOLDEN[name];
      expect(batched.out.completions, name).toEqual(golden.completions);
      golden.logpBits.forEach((hex, n) => {
        const mismatch = worstMismatch(batched.out.logps[n], fromHex(hex), {
          atol: 1e-6,
          rtol: 1e-6,
        });
        expect(mismatch, `${name} sequence ${n}`).toBeNull();
      });
    }
    model.destroy();
  });
});
