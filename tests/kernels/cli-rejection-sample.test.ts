// `npm run rejection-sample`'s work (src/cli/_rejection-sample.ts, run in-process on this file's
// engine) on the bundled tiny reasoner: from a run folder whose latest checkpoint holds its weights,
// the command writes sft.jsonl, samples.jsonl and report.json whose counts agree (kept = lines of
// sft.jsonl = Σ per-prompt kept, every kept sample a right, formatted, finished answer), samples
// the run's training prompts (none held out), writes byte-identical files for the same seed and
// other samples for another; a LoRA checkpoint samples as its merged model does, not as its base.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  parseRejectionSampleArgs,
  rejectionSampleCommand,
  rejectionSampleFromCheckpoint,
  type RejectionSampleResult,
} from '../../src/cli/_rejection-sample';
import { BUNDLED_MODEL_DIR, loadModel, type LoadedModel } from '../../src/cli/_session';
import { parameterSpecs } from '../../src/core/model-config';
import { mulberry32 } from '../../src/core/rng';
import { exportHfFolder } from '../../src/export/hf-export';
import { checkpointToFiles } from '../../src/train/checkpoint';
import { loraOptionsOf, resolveConfig, type Config } from '../../src/grpo/config';
import { PRESETS } from '../../src/grpo/presets';
import { formatOk } from '../../src/rewards/rewards';
import { loraAdapterSpecs } from '../../src/core/lora';
import type { CheckpointPayload, CheckpointTensor } from '../../src/storage/checkpoints';
import { createTask, trainEvalProblems } from '../../src/tasks/index';
import { testEngine } from './harness';

const work = mkdtempSync(join(tmpdir(), 'grpo-rejection-'));
const runDir = join(work, 'run');
const loraDir = join(work, 'lora-run', 'checkpoint-2');
const mergedDir = join(work, 'merged');
const HF_FILES = [
  'config.json',
  'generation_config.json',
  'tokenizer.json',
  'tokenizer_config.json',
];

// The aha preset, shortened: its run trains steps × perStepPrompts = 8 prompts.
const config: Config = resolveConfig({ ...PRESETS.aha, steps: 4, evalPrompts: 16 });
const loraConfig: Config = resolveConfig({
  ...PRESETS.aha,
  steps: 4,
  evalPrompts: 16,
  usePeft: true,
  loraR: 2,
  loraAlpha: 4,
  loraTargetModules: ['q_proj', 'v_proj', 'down_proj'],
});
let base: LoadedModel;

/** A checkpoint folder as `npm run train` writes one: a Hugging Face folder's files beside the
 * checkpoint codec's (weights or adapters, optimizer state, trainer_state.json). */
function writeCheckpoint(dir: string, c: Config, tensors: CheckpointTensor[], step: number) {
  mkdirSync(dir, { recursive: true });
  for (const f of HF_FILES) copyFileSync(join(BUNDLED_MODEL_DIR, f), join(dir, f));
  const payload: CheckpointPayload = {
    runId: 'test',
    step,
    optimizerStep: step,
    tensors,
    rng: {},
    config: c as unknown as Record<string, unknown>,
    modelConfig: base.hf.config,
    modelIdentity: { name: BUNDLED_MODEL_DIR, sha256: '' },
    referenceIdentity: null,
    tokenizerIdentity: null,
    metricsSoFar: null,
  };
  for (const [name, bytes] of checkpointToFiles(payload, { baseModel: BUNDLED_MODEL_DIR }))
    writeFileSync(join(dir, name), bytes);
}

beforeAll(async () => {
  base = await loadModel('bundled');
  // A run folder with two checkpoints: the latest (step 4) holds the bundled weights, step 2 holds
  // weights that would sample otherwise (all zero), so loading the wrong one shows.
  const specs = parameterSpecs(base.hf.config);
  writeCheckpoint(
    join(runDir, 'checkpoint-2'),
    config,
    specs.map((s) => ({
      name: s.name,
      shape: s.shape,
      data: new Float32Array(base.hf.tensors.get(s.name)!.length),
    })),
    2,
  );
  writeCheckpoint(
    join(runDir, 'checkpoint-4'),
    config,
    specs.map((s) => ({ name: s.name, shape: s.shape, data: base.hf.tensors.get(s.name)! })),
    4,
  );
  writeFileSync(join(runDir, 'config.json'), JSON.stringify(config, null, 2));
  // A LoRA checkpoint: seeded adapters large enough to change what the model samples.
  const lora = loraOptionsOf(loraConfig)!;
  const rand = mulberry32(7);
  const adapters = loraAdapterSpecs(base.hf.config, lora).map((s) => ({
    name: s.name,
    shape: s.shape,
    data: Float32Array.from({ length: s.shape[0] * s.shape[1] }, () => (rand() - 0.5) * 0.6),
  }));
  writeCheckpoint(loraDir, loraConfig, adapters, 2);
  mkdirSync(mergedDir, { recursive: true });
  const merged = exportHfFolder({
    config: base.hf.config,
    tensors: base.hf.tensors,
    lora: { options: lora, adapters: new Map(adapters.map((a) => [a.name, a.data])) },
    tokenizerFiles: base.hf.tokenizerFiles,
    generation: base.hf.generation,
  });
  for (const [name, bytes] of merged) writeFileSync(join(mergedDir, name), bytes);
}, 120_000);

const lines = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '');
const read = (r: RejectionSampleResult) => ({
  sft: readFileSync(r.files.sft, 'utf8'),
  samples: readFileSync(r.files.samples, 'utf8'),
  report: readFileSync(r.files.report, 'utf8'),
});

describe('npm run rejection-sample', { timeout: 600_000 }, () => {
  let first: RejectionSampleResult;
  const printed: string[] = [];

  it('writes the kept set, every sample and the counts, all agreeing', async () => {
    const engine = await testEngine();
    const out = join(work, 'out-a');
    const r = await rejectionSampleCommand(
      ['--checkpoint', runDir, '--out', out, '--k', '4', '--prompts', '3', '--seed', '5'],
      { engine, log: (line) => printed.push(line) },
    );
    first = r!;
    const { report } = first;
    expect(first.source.step).toBe(4); // the run folder's latest checkpoint
    expect(first.config.task).toBe('countdown');
    expect(first.options).toMatchObject({ k: 4, seed: 5, temperature: 1, maxCompletionLength: 80 });

    const sft = lines(first.files.sft).map((l) => JSON.parse(l));
    const samples = lines(first.files.samples).map((l) => JSON.parse(l));
    const json = JSON.parse(readFileSync(first.files.report, 'utf8'));
    expect(samples).toHaveLength(12);
    expect(report.sampled).toBe(12);
    expect(json.sampled).toBe(12);
    expect(json.perPrompt.map((p: { sampled: number }) => p.sampled)).toEqual([4, 4, 4]);
    const perPromptKept = json.perPrompt.reduce((n: number, p: { kept: number }) => n + p.kept, 0);
    const keptSamples = samples.filter((s: { kept: boolean }) => s.kept);
    expect(sft).toHaveLength(json.kept);
    expect(perPromptKept).toBe(json.kept);
    expect(keptSamples).toHaveLength(json.kept);
    expect(json.yield).toBe(json.kept / 12);
    // The tiny reasoner answers some of them right (2 of 12 with seed 5 here).
    expect(json.kept).toBeGreaterThan(0);
    // Every rejected sample says why, and the per-reason counts are those of samples.jsonl.
    const counted: Record<string, number> = {};
    for (const s of samples) {
      expect(s.kept).toBe(s.reasons.length === 0);
      for (const reason of s.reasons) counted[reason] = (counted[reason] ?? 0) + 1;
    }
    expect(Object.fromEntries(Object.entries(json.reasons).filter(([, n]) => n))).toEqual(counted);
    // The kept set is the kept samples, in order, in TRL's prompt-completion format; each is a
    // formatted, verified answer.
    expect(sft).toEqual(
      keptSamples.map((s: { prompt: string; completion: string; problemId: string }) => ({
        prompt: s.prompt,
        completion: s.completion,
        problem_id: s.problemId,
      })),
    );
    const task = createTask(config.task, config.taskOptions);
    for (const s of keptSamples) {
      expect(formatOk(s.completion)).toBe(true);
      const problem = first.problems.find((p) => p.id === s.problemId)!;
      const answer = /<answer>([\s\S]*?)<\/answer>/.exec(s.completion)![1];
      expect(task.verify(answer, problem)).toBe(true);
    }
    // The printed summary: the yield and the reasons.
    expect(printed.join('\n')).toContain(
      `kept ${json.kept} of 12 (yield ${((100 * json.kept) / 12).toFixed(1)}%)`,
    );
    console.log(`rejection-sample (bundled, k 4, 3 prompts): ${printed.slice(-3).join(' | ')}`);
  });

  it("samples the run's training prompts, never a held-out one", () => {
    const task = createTask(config.task, config.taskOptions);
    const { train, eval: held } = trainEvalProblems(
      task,
      config.seed,
      config.steps * config.perStepPrompts,
      config.evalPrompts,
    );
    expect(first.problems.map((p) => p.id)).toEqual(train.slice(0, 3).map((p) => p.id));
    const heldOut = new Set(held.map((p) => p.question));
    expect(first.problems.some((p) => heldOut.has(p.question))).toBe(false);
    const prompts = new Set(lines(first.files.samples).map((l) => JSON.parse(l).problemId));
    expect([...prompts]).toEqual(first.problems.map((p) => p.id));
  });

  it('the same seed writes the same files; another seed other samples', async () => {
    const engine = await testEngine();
    const again = await rejectionSampleFromCheckpoint({
      engine,
      checkpoint: join(runDir, 'checkpoint-4'),
      outDir: join(work, 'out-b'),
      prompts: 3,
      options: { k: 4, seed: 5 },
      log: () => {},
    });
    expect(read(again)).toEqual(read(first));
    const other = await rejectionSampleFromCheckpoint({
      engine,
      checkpoint: runDir,
      outDir: join(work, 'out-c'),
      prompts: 3,
      options: { k: 4, seed: 6 },
      log: () => {},
    });
    const texts = (r: RejectionSampleResult) =>
      lines(r.files.samples).map((l) => JSON.parse(l).completion as string);
    expect(other.problems.map((p) => p.id)).toEqual(first.problems.map((p) => p.id));
    expect(texts(other)).not.toEqual(texts(first));
    // Most samples differ, not just one.
    const same = texts(other).filter((t, i) => t === texts(first)[i]).length;
    expect(same).toBeLessThan(6);
  });

  it('the filters reject the same samples for the reasons they add', async () => {
    const engine = await testEngine();
    const r = (await rejectionSampleCommand(
      [
        ...['--checkpoint', runDir, '--out', join(work, 'out-filtered'), '--k', '4'],
        ...['--prompts', '3', '--seed', '5', '--max-length', '40', '--no-dedupe'],
        ...['--language', 'HAN', '--min-language-consistency', '0.5'],
      ],
      { engine, log: () => {} },
    ))!;
    expect(r.options).toMatchObject({
      maxLength: 40,
      dedupe: false,
      language: { script: 'Han', minLanguageConsistency: 0.5 },
    });
    type Row = { completion: string; length: number; reasons: string[] };
    const rows = (path: string) => lines(path).map((l) => JSON.parse(l) as Row);
    const before = rows(first.files.samples);
    const after = rows(r.files.samples);
    // Filters change what is kept, never what is sampled.
    expect(after.map((s) => s.completion)).toEqual(before.map((s) => s.completion));
    after.forEach((s, i) => {
      expect(s.reasons).toEqual([
        ...before[i].reasons.filter((x) => x !== 'duplicate'),
        ...(s.length > 40 ? ['too-long'] : []),
        // An English (or wordless) chain of thought is not Han.
        'language',
      ]);
    });
    expect(r.report.kept).toBe(0);
    expect(readFileSync(r.files.sft, 'utf8')).toBe('');
  });

  it('a LoRA checkpoint samples as its merged model, not as its base', async () => {
    const engine = await testEngine();
    const options = { k: 2, seed: 3 };
    const fromLora = await rejectionSampleFromCheckpoint({
      engine,
      checkpoint: loraDir,
      outDir: join(work, 'out-lora'),
      prompts: 2,
      options,
      log: () => {},
    });
    expect(fromLora.source.kind).toBe('lora-checkpoint');
    // The merged folder is a plain model folder: the run's config comes as options.
    const fromMerged = await rejectionSampleFromCheckpoint({
      engine,
      checkpoint: mergedDir,
      outDir: join(work, 'out-merged'),
      prompts: 2,
      options,
      overrides: { ...loraConfig, model: mergedDir },
      log: () => {},
    });
    const fromBase = await rejectionSampleFromCheckpoint({
      engine,
      outDir: join(work, 'out-base'),
      prompts: 2,
      options,
      overrides: { ...config },
      log: () => {},
    });
    const texts = (r: RejectionSampleResult) =>
      lines(r.files.samples).map((l) => JSON.parse(l).completion as string);
    expect(texts(fromLora)).toEqual(texts(fromMerged));
    expect(texts(fromLora)).not.toEqual(texts(fromBase));
  });

  it('refuses what it cannot do, naming the flag', async () => {
    expect(() => parseRejectionSampleArgs(['--checkpoint', runDir])).toThrow(
      '--out <folder> is required',
    );
    expect(() => parseRejectionSampleArgs(['--out', 'x', '--k', '0'])).toThrow(
      '--k must be an integer ≥ 1, got 0',
    );
    expect(() => parseRejectionSampleArgs(['--out', 'x', '--language', 'klingon'])).toThrow(
      "--language: unknown script 'klingon'",
    );
    expect(() =>
      parseRejectionSampleArgs(['--out', 'x', '--min-language-consistency', '1.5']),
    ).toThrow('--min-language-consistency must be a number in [0, 1]');
    const engine = await testEngine();
    await expect(
      rejectionSampleCommand(['--checkpoint', work, '--out', join(work, 'no')], {
        engine,
        log: () => {},
      }),
    ).rejects.toThrow('is neither a checkpoint folder');
  });
});
