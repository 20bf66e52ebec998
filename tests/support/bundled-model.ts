// The checks every bundled model folder (public/models/*) passes, loaded with the app's own loaders:
// its config and size, the shipped tokenizer (the one the corpus was built with; round-trips prompts
// and traces), the shipped weights greedy-decoding held-out prompts exactly as PyTorch did in
// tools/pretrain/pretrain.py (the app's f64 CPU reference model against the script's greedy samples),
// and the base rates of its run.json and model card re-scored from the script's samples with the
// project's reward code. tests/unit/tiny-reasoner.test.ts and tiny-student.test.ts run it per model.
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

/** One bundled model: where its files are and the shape its card documents. */
export interface BundledModelSpec {
  /** The folder's name under public/models (the card's title). */
  name: string;
  /** tools/pretrain/... folder holding the script's run.json and eval_samples.jsonl. */
  pretrainDir: string;
  hiddenSize: number;
  intermediateSize: number;
  numHeads: number;
  headDim: number;
  parameters: number;
  /** model.safetensors is smaller than this. */
  maxBytes: number;
  /** Checks of this model alone, run after the shared ones with the loaded folder. */
  extra?: (model: () => LoadedHfModel) => void;
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

export function describeBundledModel(spec: BundledModelSpec): void {
  const dir = `public/models/${spec.name}`;
  const C = spec.hiddenSize;
  /** Python's json writes NaN for the accuracy of an empty group (e.g. no greedy reflection). */
  const readRun = () =>
    JSON.parse(readFileSync(`${spec.pretrainDir}/run.json`, 'utf8').replace(/\bNaN\b/g, 'null'));

  describe(`${spec.name} model folder`, () => {
    let loaded: LoadedHfModel;
    let tok: Tokenizer;
    let samples: SampleRow[];

    beforeAll(async () => {
      loaded = await loadHfFolder(folderSource(dir));
      tok = await loadTokenizer(loaded.tokenizerFiles, {
        eosTokenIds: loaded.generation.eosTokenIds,
      });
      samples = readFileSync(`${spec.pretrainDir}/eval_samples.jsonl`, 'utf8')
        .split('\n')
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l) as SampleRow);
    });

    it('has the documented config and size', () => {
      const c = loaded.config;
      expect(c).toMatchObject({
        architecture: 'LlamaForCausalLM',
        hiddenSize: C,
        intermediateSize: spec.intermediateSize,
        numLayers: 4,
        numHeads: spec.numHeads,
        numKvHeads: spec.numHeads,
        headDim: spec.headDim,
        tieWordEmbeddings: true,
        attentionBias: false,
        bosTokenId: 1,
        eosTokenIds: [2],
      });
      expect(c.vocabSize).toBe(tok.vocabSize);
      const n = parameterCount(c);
      expect(n).toBe(4 * (4 * C * C + 3 * C * spec.intermediateSize + 2 * C) + C + c.vocabSize * C);
      expect(n).toBe(spec.parameters);
      expect(readRun().parameters).toBe(n);
      expect(statSync(`${dir}/model.safetensors`).size).toBeLessThan(spec.maxBytes);
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
      const maxNewTokens: number = readRun().eval.max_new_tokens;
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
        expect(ids.length).toBe(row.tokens);
        expect(formatOk(completion), completion).toBe(true);
      }
    });

    it('base rates in run.json and the model card re-score from the samples with the project reward code', () => {
      const markers = reflectionMarkers(COUNTDOWN_REFLECTION_MARKERS);
      const run = readRun();
      const card = readFileSync(`${dir}/README.md`, 'utf8');
      expect(card.startsWith(`# ${spec.name}\n`)).toBe(true);
      const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
      for (const mode of ['sampled', 'greedy'] as const) {
        const rows = samples.filter((s) => s.mode === mode);
        expect(rows).toHaveLength(run.eval.prompts);
        let right = 0;
        let refl = 0;
        let reflRight = 0;
        let formatted = 0;
        for (const s of rows) {
          expect(isHeldOut(problemOf(s))).toBe(true);
          const answer = extractAnswer(s.completion);
          const correct = answer !== null && verifyCountdown(answer, s.nums, s.target).ok;
          const r = reflects(thinkText(s.completion), markers);
          const format = formatOk(s.completion);
          expect([format, correct, r]).toEqual([s.format, s.correct, s.reflects]);
          right += correct ? 1 : 0;
          refl += r ? 1 : 0;
          reflRight += r && correct ? 1 : 0;
          formatted += format ? 1 : 0;
        }
        const m = run.eval[mode];
        expect(m.accuracy).toBeCloseTo(right / rows.length, 12);
        expect(m.reflection_rate).toBeCloseTo(refl / rows.length, 12);
        expect(m.format_rate).toBeCloseTo(formatted / rows.length, 12);
        if (refl > 0) expect(m.reflecting.accuracy).toBeCloseTo(reflRight / refl, 12);
        // The card's table states these numbers (sampled | greedy columns).
        expect(card).toContain(pct(right / rows.length));
        expect(card).toContain(pct(refl / rows.length));
      }
    });

    spec.extra?.(() => loaded);
  });
}
