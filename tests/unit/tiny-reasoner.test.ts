// The bundled tiny reasoner (public/models/tiny-reasoner), loaded with the app's own loaders: config,
// size, tokenizer (same as the one the corpus was built with, round-trips prompts and traces), the
// shipped weights greedy-decoding a held-out prompt into the reward format with the CPU reference
// model, and the base rates of the model card re-scored from the pretraining script's samples with
// the project's reward code.
import { readFileSync, statSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { reflectionMarkers, reflects, thinkText } from '../../src/rewards/reflection';
import { extractAnswer, formatOk } from '../../src/rewards/rewards';
import { loadHfFolder, type LoadedHfModel } from '../../src/formats/hf-folder';
import { folderSource } from '../../src/formats/model-source';
import { loadTokenizer, type Tokenizer } from '../../src/formats/tokenizer';
import { parameterCount } from '../../src/core/model-config';
import { RefLlama } from '../../src/ref/llama';
import {
  COUNTDOWN_REFLECTION_MARKERS,
  countdownQuestion,
  createCountdownTask,
} from '../../src/tasks/countdown';
import {
  generateTraces,
  isHeldOut,
  promptText,
  tinyTokenizerFiles,
  DEFAULT_TRACE_MIX,
  TINY_COUNTDOWN_OPTIONS,
} from '../../src/tasks/traces';
import type { Problem } from '../../src/tasks/types';
import { verifyCountdown } from '../../src/tasks/verify';

const DIR = 'public/models/tiny-reasoner';
const SAMPLES = 'tools/pretrain/eval_samples.jsonl';
const RUN = 'tools/pretrain/run.json';
/** Completions the reference model greedy-decodes here and compares with the script's greedy ones. */
const GREEDY_PROMPTS = 6;

interface SampleRow {
  id: string;
  mode: 'sampled' | 'greedy';
  nums: number[];
  target: number;
  completion: string;
  tokens: number;
  finished: boolean;
  format: boolean;
  correct: boolean;
  reflects: boolean;
}

const countdown = createCountdownTask(TINY_COUNTDOWN_OPTIONS);
const problemOf = (row: SampleRow): Problem => ({
  id: row.id,
  task: 'countdown',
  question: countdownQuestion(row.nums, row.target),
  reference: null,
  verifier: { kind: 'countdown', nums: row.nums, target: row.target },
});

/** Greedy decoding with the f64 CPU reference model and its KV cache; stops after EOS. */
function greedyDecode(model: RefLlama, prompt: number[], eos: number[], maxNew: number): number[] {
  const V = model.config.vocabSize;
  const argmax = (logits: Float64Array) => {
    let best = 0;
    for (let v = 1; v < V; v++) if (logits[v] > logits[best]) best = v;
    return best;
  };
  const { logits, kv } = model.prefill(
    Uint32Array.from(prompt),
    1,
    prompt.length,
    new Uint32Array(1),
    prompt.length + maxNew,
  );
  const out = [argmax(logits)];
  while (out.length < maxNew && !eos.includes(out[out.length - 1])) {
    out.push(argmax(model.decodeStep(kv, Uint32Array.of(out[out.length - 1]))));
  }
  return out;
}

describe('tiny-reasoner model folder', () => {
  let loaded: LoadedHfModel;
  let tok: Tokenizer;
  let samples: SampleRow[];

  beforeAll(async () => {
    loaded = await loadHfFolder(folderSource(DIR));
    tok = await loadTokenizer(loaded.tokenizerFiles, {
      eosTokenIds: loaded.generation.eosTokenIds,
    });
    samples = readFileSync(SAMPLES, 'utf8')
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as SampleRow);
  });

  it('has the documented config and size', () => {
    const c = loaded.config;
    expect(c).toMatchObject({
      architecture: 'LlamaForCausalLM',
      hiddenSize: 80,
      intermediateSize: 224,
      numLayers: 4,
      numHeads: 5,
      numKvHeads: 5,
      headDim: 16,
      tieWordEmbeddings: true,
      attentionBias: false,
      bosTokenId: 1,
      eosTokenIds: [2],
    });
    expect(c.vocabSize).toBe(tok.vocabSize);
    const n = parameterCount(c);
    expect(n).toBe(4 * (4 * 80 * 80 + 3 * 80 * 224 + 2 * 80) + 80 + c.vocabSize * 80);
    expect(n).toBeGreaterThan(200_000);
    expect(n).toBeLessThan(500_000);
    expect(statSync(`${DIR}/model.safetensors`).size).toBeLessThan(20 * 1024 * 1024);
    expect([...loaded.storedDtypes.values()].every((d) => d === 'F32')).toBe(true);
    expect(loaded.generation).toMatchObject({
      temperature: 1,
      maxNewTokens: DEFAULT_TRACE_MIX.maxCompletionTokens,
    });
    for (const t of loaded.tensors.values()) expect(t.every(Number.isFinite)).toBe(true);
  });

  it('ships the tokenizer the corpus was built with, which round-trips prompts and traces', () => {
    const files = tinyTokenizerFiles();
    const shipped = (name: string) =>
      JSON.parse(new TextDecoder().decode(loaded.tokenizerFiles.get(name)));
    expect(shipped('tokenizer.json')).toEqual(files.tokenizerJson);
    expect(shipped('tokenizer_config.json')).toEqual(files.tokenizerConfig);
    const [trace] = generateTraces(5, 1);
    const prompt = tok.encode(trace.prompt);
    expect(prompt[0]).toBe(tok.bosTokenId);
    expect(prompt.length).toBeLessThanOrEqual(20);
    expect(tok.decode(prompt, { skipSpecialTokens: true })).toBe(trace.prompt);
    const completion = tok.encode(trace.completion, { addSpecialTokens: false });
    expect(tok.decode(completion)).toBe(trace.completion);
    expect(tok.decode([...completion, 2], { skipSpecialTokens: true })).toBe(trace.completion);
  });

  it('greedy-decodes held-out prompts into the reward format, as the PyTorch script did', () => {
    const model = new RefLlama(loaded.config, loaded.tensors);
    // The script's limit (the corpus's maxCompletionTokens, the aha preset's maxCompletionLength).
    const maxNewTokens: number = JSON.parse(readFileSync(RUN, 'utf8').replace(/\bNaN\b/g, 'null'))
      .eval.max_new_tokens;
    expect(maxNewTokens).toBe(DEFAULT_TRACE_MIX.maxCompletionTokens);
    const greedy = samples.filter((s) => s.mode === 'greedy').slice(0, GREEDY_PROMPTS);
    expect(greedy).toHaveLength(GREEDY_PROMPTS);
    for (const row of greedy) {
      const problem = problemOf(row);
      expect(isHeldOut(problem)).toBe(true);
      const text = promptText(countdown, problem);
      const ids = greedyDecode(model, tok.encode(text), tok.eosTokenIds, maxNewTokens);
      const completion = tok.decode(ids, { skipSpecialTokens: true });
      expect(completion).toBe(row.completion);
      expect(formatOk(completion), completion).toBe(true);
    }
  });

  it('base rates in run.json re-score from the samples with the project reward code', () => {
    const markers = reflectionMarkers(COUNTDOWN_REFLECTION_MARKERS);
    const sampled = samples.filter((s) => s.mode === 'sampled');
    expect(sampled.length).toBeGreaterThanOrEqual(200);
    let right = 0;
    let refl = 0;
    let reflRight = 0;
    for (const s of sampled) {
      expect(isHeldOut(problemOf(s))).toBe(true);
      const answer = extractAnswer(s.completion);
      const correct = answer !== null && verifyCountdown(answer, s.nums, s.target).ok;
      const r = reflects(thinkText(s.completion), markers);
      expect([formatOk(s.completion), correct, r]).toEqual([s.format, s.correct, s.reflects]);
      right += correct ? 1 : 0;
      refl += r ? 1 : 0;
      reflRight += r && correct ? 1 : 0;
    }
    // Python's json writes NaN for the accuracy of an empty group (e.g. no greedy reflection).
    const run = JSON.parse(readFileSync(RUN, 'utf8').replace(/\bNaN\b/g, 'null'));
    const m = run.eval.sampled;
    expect(m.accuracy).toBeCloseTo(right / sampled.length, 12);
    expect(m.reflection_rate).toBeCloseTo(refl / sampled.length, 12);
    if (refl > 0) expect(m.reflecting.accuracy).toBeCloseTo(reflRight / refl, 12);
  });
});
