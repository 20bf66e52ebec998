// Batched generation: N sequences (G completions for each of B prompts, prompts repeated) are
// left-padded to a common prompt width P, prefilled into a KV cache in one pass, then decoded one
// token per step for all N at once. Tokens stay on the GPU between steps (the sampled token of step
// i is the input of step i + 1) and so do the rotary positions (one (steps − 1, N) table uploaded
// once, its row i copied into place on the GPU), so several steps go out in one submission: the
// host waits only every checkEvery steps, for that submission's tokens and log-probs, and stops
// early once every sequence has emitted EOS. With a repetition penalty, a (N, ceil(V/32)) bitmap
// of the token ids each sequence has seen (its prompt, then every drawn token: the sampling kernel
// sets the bit) stays on the GPU beside them; without one, nothing is built or uploaded.
//
// Legend: N sequences, P prompt width, V vocab, S = P + maxNewTokens cache columns.
import { createStorageBuffer, writeBuffer } from '../engine/buffers';
import type { Engine, Readback } from '../engine/engine';
import { SampleKernel, seenBitmap } from '../kernels/sampling';
import { mixSeeds } from '../core/rng';
import type { GpuLlama } from './llama';

export interface SampleOptions {
  maxNewTokens: number;
  /** Softmax temperature (> 0). Ignored when greedy. */
  temperature: number;
  /** Keep the k most likely tokens (0 = off). */
  topK: number;
  /** Keep the smallest set of tokens whose probability reaches p (1 = off). */
  topP: number;
  /** Keep tokens with probability ≥ minP · the largest (0 or absent = off; TRL min_p). */
  minP?: number;
  /**
   * Divide the logits of token ids already in the prompt or the completion by this (multiply when
   * negative) before the other filters (1 or absent = off; TRL repetition_penalty).
   */
  repetitionPenalty?: number;
  /** Argmax decoding (lowest id on ties). */
  greedy?: boolean;
  /** Seed of the counter-based RNG; with `stream` it fixes every draw of this call. */
  seed: number;
  /** Distinguishes calls with the same seed (the training step, the eval round …). */
  stream: number;
  eosTokenIds: readonly number[];
  /** Token used to left-pad prompts (never attended to). Defaults to the first EOS id or 0. */
  padTokenId?: number;
  /**
   * Decode steps between two CPU waits: each wait reads the new tokens back to stop early when
   * all sequences ended. Default 8. The results are the same bits for any value.
   */
  checkEvery?: number;
  /**
   * Decode steps per submission (default checkEvery; smaller values submit without waiting in
   * between). 1 submits every token alone: the tests' comparison for the batched encoding.
   */
  tokensPerSubmit?: number;
  /**
   * Prefill each distinct prompt once and copy its KV cache to the sequences that repeat it (a
   * GRPO group is G copies of one prompt). Default true; the results are the same bits either way.
   */
  sharedPrefill?: boolean;
}

/**
 * The distinct prompts of a batch: `first[u]` is the first sequence holding prompt u and
 * `of[n]` the prompt of sequence n. Prompts are compared by their token ids.
 */
export function distinctPrompts(prompts: readonly (readonly number[])[]): {
  first: number[];
  of: number[];
} {
  const index = new Map<string, number>();
  const first: number[] = [];
  const of = prompts.map((p, n) => {
    const key = p.join(',');
    let u = index.get(key);
    if (u === undefined) {
      u = first.length;
      index.set(key, u);
      first.push(n);
    }
    return u;
  });
  return { first, of };
}

export interface SampleResult {
  /** (N) generated ids, up to and including the first EOS; maxNewTokens ids when none came. */
  completions: number[][];
  /** (N) whether the sequence ended with EOS (false = truncated at maxNewTokens). */
  finished: boolean[];
  /** (N) log-prob of each generated token under the full tempered softmax (TRL's old log-probs). */
  logps: Float32Array[];
}

/** Batched generation, on the GPU (Sampler) or on the CPU reference model (RefSampler). */
export interface TextGenerator {
  generate(prompts: readonly (readonly number[])[], options: SampleOptions): Promise<SampleResult>;
}

/** Left-pads prompts to a common width P: tokens (N, P), rotary positions (N, P), keyStart (N). */
export function leftPadPrompts(prompts: readonly (readonly number[])[], pad: number) {
  const N = prompts.length;
  const P = Math.max(...prompts.map((p) => p.length));
  if (!(P > 0)) throw new Error('generate: a prompt needs at least one token');
  const keyStart = new Uint32Array(N);
  const tokens = new Uint32Array(N * P).fill(pad);
  const positions = new Uint32Array(N * P);
  prompts.forEach((prompt, n) => {
    const start = P - prompt.length;
    keyStart[n] = start;
    for (let i = 0; i < prompt.length; i++) {
      tokens[n * P + start + i] = prompt[i];
      positions[n * P + start + i] = i;
    }
  });
  return { P, tokens, positions, keyStart };
}

/** Cuts each sequence's (steps, N)-ordered tokens at its first EOS (kept) into the result shape. */
export function collectCompletions(
  tokens: ArrayLike<number>,
  logps: ArrayLike<number>,
  N: number,
  steps: number,
  eos: ReadonlySet<number>,
): SampleResult {
  const completions: number[][] = [];
  const finished: boolean[] = [];
  const completionLogps: Float32Array[] = [];
  for (let n = 0; n < N; n++) {
    const ids: number[] = [];
    const lp: number[] = [];
    let ended = false;
    for (let i = 0; i < steps && !ended; i++) {
      const id = tokens[i * N + n];
      ids.push(id);
      lp.push(logps[i * N + n]);
      ended = eos.has(id);
    }
    completions.push(ids);
    finished.push(ended);
    completionLogps.push(Float32Array.from(lp));
  }
  return { completions, finished, logps: completionLogps };
}

export class Sampler implements TextGenerator {
  private readonly sample: SampleKernel;
  /** The model's pipelines and the sampling kernel's, compiled (generate awaits it). */
  private readonly ready: Promise<unknown>;

  /** Whether decoding uses the model's LoRA adapters (false: the base model alone). */
  private readonly adapters: boolean;

  /**
   * `adapters: false` decodes a LoRA model's base alone (each forward encoded inside
   * withAdaptersDisabled, so the same weights give the base model's exact tokens).
   */
  constructor(
    private readonly engine: Engine,
    private readonly model: GpuLlama,
    options: { adapters?: boolean } = {},
  ) {
    this.adapters = options.adapters ?? true;
    this.sample = new SampleKernel(engine.device, engine.pipelines);
    this.ready = Promise.all([model.ready, this.sample.prepare(model.config.vocabSize)]);
    this.ready.catch(() => {}); // reported by generate(), not as an unhandled rejection
  }

  async generate(
    prompts: readonly (readonly number[])[],
    options: SampleOptions,
  ): Promise<SampleResult> {
    const { device } = this.engine;
    const N = prompts.length;
    const V = this.model.config.vocabSize;
    const steps = options.maxNewTokens;
    if (N === 0) return { completions: [], finished: [], logps: [] };
    if (steps < 1) throw new RangeError('maxNewTokens must be ≥ 1');
    const eos = new Set(options.eosTokenIds);
    const pad = options.padTokenId ?? options.eosTokenIds[0] ?? 0;
    const {
      P,
      tokens: promptTokens,
      positions: promptPositions,
      keyStart,
    } = leftPadPrompts(prompts, pad);
    if (P + steps > this.model.config.maxPositions) {
      throw new RangeError(
        `prompt (${P}) + maxNewTokens (${steps}) exceed the model's ${this.model.config.maxPositions} positions`,
      );
    }

    const owned: GPUBuffer[] = [];
    const buf = (bytes: number, label: string) => {
      const b = createStorageBuffer(device, bytes, `sampler.${label}`);
      owned.push(b);
      return b;
    };
    const next = buf(N * 4, 'next'); // (N) u32 token sampled at the current step
    const nextLogp = buf(N * 4, 'nextLogp'); // (N) f32
    const positions = buf(N * 4, 'positions'); // (N) u32 position of `next`
    const history = buf(steps * N * 4, 'history'); // (steps, N) u32
    const logpHistory = buf(steps * N * 4, 'logpHistory'); // (steps, N) f32
    const repetitionPenalty = options.repetitionPenalty ?? 1;
    // (N, ceil(V/32)) u32 seen-token bitmap, from the prompts (not their left padding, as vLLM
    // sees them); a 4-byte placeholder when the penalty is off (the kernel never reads it).
    const penalised = Math.fround(repetitionPenalty) !== 1;
    const seenInit = penalised ? seenBitmap(prompts, V) : null;
    const seen = buf(seenInit ? seenInit.byteLength : 4, 'seen');
    if (seenInit) writeBuffer(device, seen, seenInit);
    const cache = this.model.createKvCache(N, P + steps, keyStart);
    // The prompt columns are prefilled once per distinct prompt (U of them): the prefill's
    // scratch and compute shrink from N·P rows to U·P, and its KV columns are copied to every
    // sequence that repeats the prompt. Rows never interact in the model but through attention,
    // which is per sequence, so each copy holds the bits its own prefill would have made.
    const distinct = distinctPrompts(prompts);
    const U = options.sharedPrefill === false ? N : distinct.first.length;
    const rowsOf = (data: Uint32Array) => {
      if (U === N) return data;
      const out = new Uint32Array(U * P);
      distinct.first.forEach((n, u) => out.set(data.subarray(n * P, (n + 1) * P), u * P));
      return out;
    };
    const promptBuf = buf(U * P * 4, 'prompt'); // (U, P) u32
    const promptPosBuf = buf(U * P * 4, 'promptPositions'); // (U, P) u32
    writeBuffer(device, promptBuf, rowsOf(promptTokens));
    writeBuffer(device, promptPosBuf, rowsOf(promptPositions));
    // Philox is keyed by (seed, sequence, decode step): fold the stream into the seed so that
    // every training step draws fresh numbers.
    const callSeed = mixSeeds(options.seed, options.stream);

    // Encoding is synchronous: the adapters are off exactly while this forward is encoded.
    const extend = (...args: Parameters<GpuLlama['extend']>) =>
      this.adapters
        ? this.model.extend(...args)
        : this.model.withAdaptersDisabled(() => this.model.extend(...args));
    const prefill = (enc: GPUCommandEncoder): GPUBuffer => {
      if (U === N) return extend(enc, cache, promptBuf, promptPosBuf, P, 0);
      const keyStartU = Uint32Array.from(distinct.first, (n) => keyStart[n]);
      const shared = this.model.createKvCache(U, P, keyStartU, 'kvp');
      const logitsU = extend(enc, shared, promptBuf, promptPosBuf, P, 0); // (U, V)
      const logits = buf(N * V * 4, 'prefillLogits'); // (N, V)
      for (let n = 0; n < N; n++) {
        const u = distinct.of[n];
        this.model.copyKvColumns(enc, shared, u, cache, n, P);
        enc.copyBufferToBuffer(logitsU, u * V * 4, logits, n * V * 4, V * 4);
      }
      return logits;
    };
    const draw = (enc: GPUCommandEncoder, logits: GPUBuffer, i: number) => {
      this.sample.encode(enc, {
        logits,
        tokens: next,
        logps: nextLogp,
        seen,
        N,
        V,
        options: {
          temperature: options.temperature,
          topK: options.topK,
          topP: options.topP,
          greedy: options.greedy ?? false,
          minP: options.minP ?? 0,
          repetitionPenalty,
        },
        seed: callSeed,
        step: i,
      });
      enc.copyBufferToBuffer(next, 0, history, i * N * 4, N * 4);
      enc.copyBufferToBuffer(nextLogp, 0, logpHistory, i * N * 4, N * 4);
    };

    const checkEvery = options.checkEvery ?? 8;
    const perSubmit = options.tokensPerSubmit ?? checkEvery;
    for (const [name, value] of [
      ['checkEvery', checkEvery],
      ['tokensPerSubmit', perSubmit],
    ] as const) {
      if (!(Number.isInteger(value) && value >= 1))
        throw new RangeError(`${name} must be an integer ≥ 1, got ${value}`);
    }
    // (steps − 1, N) u32: row i − 1 holds the rotary positions of decode step i, whose input (the
    // token drawn at step i − 1) sits at column P + i − 1.
    const stepPositions = new Uint32Array(Math.max(steps - 1, 1) * N);
    for (let i = 1; i < steps; i++)
      for (let n = 0; n < N; n++) stepPositions[(i - 1) * N + n] = P + i - 1 - keyStart[n];
    const positionTable = buf(stepPositions.byteLength, 'positionTable');
    writeBuffer(device, positionTable, stepPositions);
    const decodeStep = (enc: GPUCommandEncoder, i: number) => {
      enc.copyBufferToBuffer(positionTable, (i - 1) * N * 4, positions, 0, N * 4);
      draw(enc, extend(enc, cache, next, positions, 1, P + i - 1), i);
    };

    // The host's copy of the (steps, N) tokens and log-probs, filled at each wait.
    const tokens = new Uint32Array(steps * N);
    const logps = new Float32Array(steps * N);
    const ended = new Uint8Array(N);
    let endedCount = 0;
    let readRows = 0;
    const readTo = (rows: number): Readback[] => [
      { buffer: history, offset: readRows * N * 4, bytes: (rows - readRows) * N * 4 },
      { buffer: logpHistory, offset: readRows * N * 4, bytes: (rows - readRows) * N * 4 },
    ];
    const absorb = ([t, l]: ArrayBuffer[], rows: number) => {
      tokens.set(new Uint32Array(t), readRows * N);
      logps.set(new Float32Array(l), readRows * N);
      for (let i = readRows; i < rows; i++) {
        for (let n = 0; n < N; n++) {
          if (!ended[n] && eos.has(tokens[i * N + n])) {
            ended[n] = 1;
            endedCount++;
          }
        }
      }
      readRows = rows;
    };

    let submitted = false;
    try {
      // Pipelines compiled first (since the model loaded), so that encoding never compiles.
      await this.ready;
      const first = (enc: GPUCommandEncoder) => draw(enc, prefill(enc), 0);
      submitted = true;
      if (steps === 1) absorb(await this.engine.run(first, 'prefill', { read: readTo(1) }), 1);
      else await this.engine.run(first, 'prefill', { wait: false });
      let done = 1;
      while (done < steps) {
        // Up to the next multiple of checkEvery (the same stopping points for any submission
        // size), in submissions of perSubmit steps; the last one reads the new rows back.
        const until = Math.min(steps, (Math.floor(done / checkEvery) + 1) * checkEvery);
        while (done < until) {
          const from = done;
          const to = Math.min(until, from + perSubmit);
          const encode = (enc: GPUCommandEncoder) => {
            for (let i = from; i < to; i++) decodeStep(enc, i);
          };
          const count = to - from;
          if (to < until) await this.engine.run(encode, 'decode', { wait: false, count });
          else absorb(await this.engine.run(encode, 'decode', { read: readTo(to), count }), to);
          done = to;
        }
        if (endedCount === N) break;
      }
      return collectCompletions(tokens, logps, N, done, eos);
    } catch (err) {
      // Submissions that did not wait may still use this call's buffers: let them finish first.
      if (submitted) await device.queue.onSubmittedWorkDone().catch(() => {});
      throw err;
    } finally {
      // Also on an exception mid-generation: nothing of this call stays allocated.
      for (const b of owned) b.destroy();
    }
  }
}
