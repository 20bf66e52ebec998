// The CPU reference model (src/ref/llama.ts) on its own: finite-difference checks of its backward
// (every parameter tensor, both architectures), KV-cache decode against the full forward, and left
// padding leaving the valid tokens of a sequence unchanged.
import { describe, expect, it } from 'vitest';
import { numel, parameterSpecs, type LlamaConfig } from '../../src/core/model-config';
import { mulberry32 } from '../../src/core/rng';
import {
  RefLlama,
  completionLogprobsBackwardRef,
  completionLogprobsRef,
  positionsFromKeyStart,
} from '../../src/ref/llama';

// Central differences in f64 with step 1e-5: truncation ~h²·f‴ and rounding ~1e-16·|L|/h are both
// ~1e-10, so agreement to 1e-7 absolute + 1e-6 relative is ~1000x above the noise and far below the
// size of a wrong term (gradients here are ~1e-3..1).
const FD_STEP = 1e-5;
const GRADIENT_TOLERANCE = { atol: 1e-7, rtol: 1e-6 };
// Decode and padded runs do the same f64 sums in the same order as the full/unpadded forward.
const FORWARD_TOLERANCE = { atol: 1e-12, rtol: 1e-12 };

function tinyConfig(overrides: Partial<LlamaConfig>): LlamaConfig {
  return {
    architecture: 'LlamaForCausalLM',
    hiddenSize: 8,
    intermediateSize: 12,
    numLayers: 2,
    numHeads: 2,
    numKvHeads: 1,
    headDim: 4,
    vocabSize: 11,
    maxPositions: 32,
    ropeTheta: 10000,
    rmsNormEps: 1e-6,
    tieWordEmbeddings: false,
    attentionBias: false,
    bosTokenId: null,
    eosTokenIds: [],
    ...overrides,
  };
}

const CONFIGS: Array<[string, LlamaConfig]> = [
  ['GQA, untied', tinyConfig({})],
  [
    'Qwen2-style tied + q/k/v bias',
    tinyConfig({
      architecture: 'Qwen2ForCausalLM',
      numHeads: 3,
      numKvHeads: 3,
      hiddenSize: 6,
      headDim: 2,
      tieWordEmbeddings: true,
      attentionBias: true,
      ropeTheta: 1e6,
    }),
  ],
];

function randomParams(config: LlamaConfig, seed: number): Map<string, Float64Array> {
  const rand = mulberry32(seed);
  const params = new Map<string, Float64Array>();
  for (const spec of parameterSpecs(config)) {
    const a = new Float64Array(numel(spec.shape));
    const isNorm = spec.name.endsWith('norm.weight');
    for (let i = 0; i < a.length; i++) a[i] = isNorm ? 1 + 0.2 * (rand() - 0.5) : rand() - 0.5;
    params.set(spec.name, a);
  }
  return params;
}

function randomTokens(count: number, V: number, seed: number): Uint32Array {
  const rand = mulberry32(seed);
  return Uint32Array.from({ length: count }, () => Math.floor(rand() * V));
}

function expectClose(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  tol: { atol: number; rtol: number },
  what: string,
) {
  expect(actual.length, what).toBe(expected.length);
  for (let i = 0; i < expected.length; i++) {
    const bound = tol.atol + tol.rtol * Math.abs(expected[i]);
    if (!(Math.abs(actual[i] - expected[i]) <= bound)) {
      expect.fail(`${what}[${i}]: got ${actual[i]}, expected ${expected[i]} (±${bound})`);
    }
  }
}

const dot = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
};

/** Columns of (N, T, V) logits from `start[n]` on, row by row. */
function columnsFrom(logits: Float64Array, N: number, T: number, V: number, start: number[]) {
  const out: number[] = [];
  for (let n = 0; n < N; n++) {
    for (let t = start[n]; t < T; t++)
      out.push(...logits.subarray((n * T + t) * V, (n * T + t + 1) * V));
  }
  return out;
}

for (const [label, config] of CONFIGS) {
  describe(`RefLlama (${label})`, () => {
    const V = config.vocabSize;

    it('backward matches central finite differences on every parameter tensor', () => {
      const params = randomParams(config, 1);
      const N = 2;
      const T = 5;
      const keyStart = Uint32Array.from([0, 2]); // one left-padded row
      const tokens = randomTokens(N * T, V, 2);
      // L = Σ w ∘ logits with fixed random weights: its dLogits is w, so backward(cache, w) = ∂L/∂θ.
      const rand = mulberry32(3);
      const w = Float64Array.from({ length: N * T * V }, () => rand() - 0.5);
      const model = new RefLlama(config, params);
      const { cache } = model.forward(tokens, N, T, keyStart);
      const grads = model.backward(cache, w);
      const lossAt = () => dot(model.forward(tokens, N, T, keyStart).logits, w);
      const pick = mulberry32(4);
      for (const spec of parameterSpecs(config)) {
        const p = model.params.get(spec.name)!;
        const g = grads.get(spec.name)!;
        const picks = [0, p.length - 1, Math.floor(pick() * p.length)];
        if (spec.name === 'model.embed_tokens.weight') {
          // Rows of tokens that occur, so the embedding lookup's gradient is exercised.
          const C = config.hiddenSize;
          picks.push(tokens[0] * C + 1, tokens[N * T - 1] * C + C - 1);
        }
        let largest = 0;
        for (const i of picks) {
          const saved = p[i];
          p[i] = saved + FD_STEP;
          const plus = lossAt();
          p[i] = saved - FD_STEP;
          const minus = lossAt();
          p[i] = saved;
          const fd = (plus - minus) / (2 * FD_STEP);
          expectClose([g[i]], [fd], GRADIENT_TOLERANCE, `${spec.name}[${i}]`);
          largest = Math.max(largest, Math.abs(fd));
        }
        // At least one checked entry has a real gradient, so agreement is not 0 = 0.
        expect(largest, spec.name).toBeGreaterThan(1e-4);
      }
    });

    it('temperature log-prob backward matches finite differences', () => {
      const N = 2;
      const T = 4;
      const P = 2;
      const tau = 0.7;
      const rand = mulberry32(5);
      const logits = Float64Array.from({ length: N * T * V }, () => 3 * (rand() - 0.5));
      const tokens = randomTokens(N * T, V, 6);
      const c = Float64Array.from({ length: N * (T - P) }, () => rand() - 0.5);
      const f = () => dot(completionLogprobsRef(logits, tokens, N, T, V, P, tau), c);
      const d = completionLogprobsBackwardRef(logits, tokens, c, N, T, V, P, tau);
      for (let i = 0; i < logits.length; i++) {
        const saved = logits[i];
        logits[i] = saved + FD_STEP;
        const plus = f();
        logits[i] = saved - FD_STEP;
        const minus = f();
        logits[i] = saved;
        expectClose([d[i]], [(plus - minus) / (2 * FD_STEP)], GRADIENT_TOLERANCE, `dLogits[${i}]`);
      }
      // Only columns P−1 … T−2 score completion tokens; the last column gets no gradient.
      expect(d.subarray((T - 1) * V, T * V).every((x) => x === 0)).toBe(true);
      // And logp itself is the log-softmax at the temperature (hand-checked on one entry).
      const logp = completionLogprobsRef(logits, tokens, N, T, V, P, tau);
      const row = logits.subarray((P - 1) * V, P * V);
      const lse = Math.log(row.reduce((s, z) => s + Math.exp(z / tau), 0));
      expect(logp[0]).toBeCloseTo(row[tokens[P]] / tau - lse, 12);
    });

    it('KV-cache prefill + decode gives the full-forward logits (rows of different prompt lengths)', () => {
      const model = new RefLlama(config, randomParams(config, 7));
      const N = 3;
      const P = 5;
      const T = P + 4;
      const keyStart = Uint32Array.from([0, 3, 2]); // prompt lengths 5, 2, 3
      const tokens = randomTokens(N * T, V, 8);
      const full = model.forward(tokens, N, T, keyStart).logits; // (N, T, V)
      const column = (t: number) =>
        Array.from({ length: N }, (_, n) => [
          ...full.subarray((n * T + t) * V, (n * T + t + 1) * V),
        ]).flat();

      const prompt = new Uint32Array(N * P);
      for (let n = 0; n < N; n++) prompt.set(tokens.subarray(n * T, n * T + P), n * P);
      const { logits, kv } = model.prefill(prompt, N, P, keyStart, T + 3);
      expectClose(logits, column(P - 1), FORWARD_TOLERANCE, 'prefill');
      for (let t = P; t < T; t++) {
        const step = Uint32Array.from({ length: N }, (_, n) => tokens[n * T + t]);
        expectClose(model.decodeStep(kv, step), column(t), FORWARD_TOLERANCE, `decode column ${t}`);
      }
      expect(kv.length).toBe(T);
      // Decoding really depends on the cache: a cache of other tokens gives other logits.
      const other = model.prefill(randomTokens(N * P, V, 9), N, P, keyStart, T).kv;
      const step = Uint32Array.from({ length: N }, (_, n) => tokens[n * T + P]);
      const changed = model.decodeStep(other, step);
      const expected = column(P);
      expect(changed.some((x, i) => Math.abs(x - expected[i]) > 1e-6)).toBe(true);
    });

    it('left padding leaves the logits and gradients of the valid tokens unchanged', () => {
      const model = new RefLlama(config, randomParams(config, 10));
      const len = 5;
      const seq = randomTokens(len, V, 11);
      const alone = model.forward(seq, 1, len, Uint32Array.from([0]));

      // The same sequence left-padded by 3 (with arbitrary pad ids) next to an unpadded row.
      const T = len + 3;
      const tokens = randomTokens(2 * T, V, 12);
      tokens.set(seq, 3);
      const keyStart = Uint32Array.from([3, 0]);
      expect(Array.from(positionsFromKeyStart(keyStart, 2, T).subarray(0, T))).toEqual([
        0, 0, 0, 0, 1, 2, 3, 4,
      ]);
      const padded = model.forward(tokens, 2, T, keyStart);
      expectClose(
        columnsFrom(padded.logits, 1, T, V, [3]),
        alone.logits,
        FORWARD_TOLERANCE,
        'padded logits',
      );

      // Gradient of Σ w ∘ logits over the valid columns of row 0 only: pad columns must not leak.
      const rand = mulberry32(13);
      const w = Float64Array.from({ length: len * V }, () => rand() - 0.5);
      const wPadded = new Float64Array(2 * T * V);
      wPadded.set(w, 3 * V);
      const gAlone = model.backward(alone.cache, w);
      const gPadded = model.backward(padded.cache, wPadded);
      for (const spec of parameterSpecs(config)) {
        expectClose(
          gPadded.get(spec.name)!,
          gAlone.get(spec.name)!,
          { atol: 1e-12, rtol: 1e-10 },
          spec.name,
        );
      }
    });
  });
}

it('RefLlama rejects missing or misshapen parameters', () => {
  const config = CONFIGS[0][1];
  const params = randomParams(config, 14);
  params.delete('model.norm.weight');
  expect(() => new RefLlama(config, params)).toThrow(/model\.norm\.weight/);
  const short = randomParams(config, 14);
  short.set('lm_head.weight', new Float64Array(3));
  expect(() => new RefLlama(config, short)).toThrow(/lm_head\.weight/);
});
