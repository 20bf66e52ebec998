// Batched generation on the CPU reference model (src/ref/llama.ts): the same TextGenerator contract
// and the same Philox draws as the GPU Sampler, for browsers without WebGPU (chat and evaluation
// with the bundled model still work, slowly) and as the oracle in tests.
import type { RefLlama } from '../ref/llama';
import { sampleRef } from '../ref/sampling';
import { mixSeeds } from '../core/rng';
import {
  collectCompletions,
  leftPadPrompts,
  type SampleOptions,
  type SampleResult,
  type TextGenerator,
} from './sampler';

export class RefSampler implements TextGenerator {
  constructor(private readonly model: RefLlama) {}

  async generate(
    prompts: readonly (readonly number[])[],
    options: SampleOptions,
  ): Promise<SampleResult> {
    const N = prompts.length;
    const V = this.model.config.vocabSize;
    const steps = options.maxNewTokens;
    if (N === 0) return { completions: [], finished: [], logps: [] };
    if (steps < 1) throw new RangeError('maxNewTokens must be ≥ 1');
    const eos = new Set(options.eosTokenIds);
    const pad = options.padTokenId ?? options.eosTokenIds[0] ?? 0;
    const { P, tokens: promptTokens, keyStart } = leftPadPrompts(prompts, pad);
    const sampling = {
      temperature: options.temperature,
      topK: options.topK,
      topP: options.topP,
      greedy: options.greedy ?? false,
      minP: options.minP ?? 0,
      repetitionPenalty: options.repetitionPenalty ?? 1,
    };
    // The token ids each sequence has seen (prompt, then its draws) for the repetition penalty.
    const seen =
      Math.fround(sampling.repetitionPenalty) !== 1 ? prompts.map((p) => new Set(p)) : undefined;
    const seed = mixSeeds(options.seed, options.stream);
    const tokens = new Uint32Array(steps * N); // (steps, N)
    const logps = new Float64Array(steps * N);
    const { logits, kv } = this.model.prefill(promptTokens, N, P, keyStart, P + steps);
    let row = logits; // (N, V)
    let done = 0;
    for (let i = 0; i < steps; i++) {
      const drawn = sampleRef(row, N, V, sampling, seed, i, 0, seen);
      tokens.set(drawn.tokens, i * N);
      logps.set(drawn.logps, i * N);
      done = i + 1;
      if (drawn.tokens.every((t, n) => eos.has(t) || firstEos(tokens, N, i, n, eos))) break;
      if (i + 1 < steps) row = this.model.decodeStep(kv, drawn.tokens);
      // A microtask yield: other promise continuations run, the event loop does not (no rendering,
      // no incoming messages). The page stays responsive because this runs in a worker
      // (workers/cpu.worker.ts).
      await Promise.resolve();
    }
    return collectCompletions(tokens, logps, N, done, eos);
  }
}

/** Whether sequence n emitted an EOS before step i. */
function firstEos(
  tokens: Uint32Array,
  N: number,
  i: number,
  n: number,
  eos: ReadonlySet<number>,
): boolean {
  for (let j = 0; j < i; j++) if (eos.has(tokens[j * N + n])) return true;
  return false;
}
