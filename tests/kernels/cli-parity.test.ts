// The parity matrix of issue 32, command-line half: every kind of run the command line trains
// (GRPO full fine-tune in f32; GRPO LoRA on an f32 base; GRPO LoRA on a bf16 base; SFT; a
// two-stage SFT → GRPO recipe), built once and run as node processes on the tiny Hugging Face
// folder, is stopped, resumed in a fresh process and must end exactly as the same run
// uninterrupted: the bytes of every weights and optimizer file of every checkpoint, the
// checkpoints' trainer_state.json (step, optimizerStep, counters, config; the run's id and name
// aside), the metrics rows (wall-clock fields aside) and samples. The exports load back with the
// log-probs of the weights that were trained: the merged Hugging Face folder of --export gives
// the teacher-forced log-probs (scoreCompletions) of the checkpoint's weights bit for bit for a
// full fine-tune; for LoRA the PEFT adapter/ on the base gives those of the checkpoint's adapters
// bit for bit (the same tensors through the same kernels) and the merged folder gives them within
// MERGED_ATOL (W + s·B·A summed once on the CPU against x·Wᵀ + s·(x·Aᵀ)·Bᵀ on the GPU: the same
// math, another order of float roundings).
//
// How each kind stops and resumes (a fresh process each time, as a user would):
//   train (full, LoRA f32, LoRA bf16): `--steps 3` uninterrupted vs `--steps 2`, then
//     `--resume <run>/checkpoint-2 --steps 3` (a constant learning rate: a linear schedule's rates
//     depend on --steps, so a run lengthened on resume is another run by design);
//   sft: `--max-steps 3` vs `--max-steps 2`, then `--resume <run>/checkpoint-2 --max-steps 3`
//     (4 examples in batches of 2: step 3 starts the second epoch's shuffle);
//   recipe (SFT 2 steps → GRPO 2 steps): the command has no stop flag, so a process is stopped as
//     Ctrl-C would stop it, at a chosen point (the SIGKILL test hook of src/cli/_atomic-files.ts):
//     right after the state.json that ends the SFT stage (timeline step 2, a stage boundary), then
//     the resumed process right after the GRPO stage's checkpoint-1 (timeline step 3, inside the
//     stage); a third process resumes to the end. tests/kernels/cli-kill.test.ts stops the recipe
//     after each of its writes; this is the plain stop/resume at those two points.
// Every run gets a reward that varies between the random model's completions (the count of
// digits), β > 0 (the reference policy must come back as the base, not the checkpoint) and a
// learning rate that moves the weights every step, so a resume that is not exact shows in the
// bytes; the full run takes μ = 2 optimizer steps per step (optimizerStep ≠ step).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadModel, type LoadedModel } from '../../src/cli/_session';
import {
  parsePeftAdapter,
  PEFT_CONFIG_FILE,
  PEFT_WEIGHTS_FILE,
} from '../../src/export/peft-adapter';
import { loadHfFolder } from '../../src/formats/hf-folder';
import { folderSource } from '../../src/formats/model-source';
import { scoreCompletions } from '../../src/grpo/score-completions';
import { GpuLlama } from '../../src/model/llama';
import type { WeightDtype } from '../../src/kernels/matmul';
import { loraTargets, type LoraOptions } from '../../src/core/lora';
import { checkpointFromFiles, payloadToSnapshot } from '../../src/train/checkpoint';
import { TWO_STAGE } from '../support/two-stage-recipe';
import { tinyHfFolder } from '../support/tiny-hf-model';
import { runBuiltCli, type CliRun } from '../support/cli-process';
import { testEngine } from './harness';

const work = mkdtempSync(join(tmpdir(), 'grpo-cli-parity-'));
// A build of its own: the other command-line tests rebuild dist-cli/ (emptying it first).
const BUILD = 'node_modules/.cache/grpo-cli-parity';
const modelDir = join(work, 'model');
const rewardFile = join(work, 'digits.js');
const sftData = join(work, 'sft.jsonl');
const recipeFile = join(work, 'recipe.json');

/**
 * Merged LoRA weights against separate adapters, teacher-forced log-probs: |Δ| ≤ this. Both are
 * f32 computations of the same function, W + s·B·A rounded once to f32 (summed in f64 by
 * mergeLoraWeights) against x·Wᵀ + s·(x·Aᵀ)·Bᵀ rounded per product on the GPU: their log-probs
 * (about −6 here, an f32 ulp ≈ 5e-7) may differ by a few roundings. Measured here: 0 (the tiny
 * model's adapter terms are too small to move a rounding); the bf16 base's rounding alone moves
 * them by ~2e-4, so the tolerance still tells the two bases apart.
 */
const MERGED_ATOL = 1e-5;

const DIGITS =
  'function reward({ completion }) { return (completion.match(/[0-9]/g) || []).length; }';

// ---- processes ---------------------------------------------------------------------------------

type Ran = CliRun;
const cli = (name: string, args: string[], env: Record<string, string> = {}) =>
  runBuiltCli(BUILD, name, args, env);

/** Runs and expects exit status 0. */
async function ok(name: string, args: string[]): Promise<Ran> {
  const r = await cli(name, args);
  expect(r.status, `${name} ${args.join(' ')}\n${r.out}\n${r.err}`).toBe(0);
  return r;
}

// ---- what a run folder holds -------------------------------------------------------------------

const WALL_CLOCK = new Set(['step_time', 'tokens_per_second']);
const timeless = (row: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(row).filter(([k]) => !WALL_CLOCK.has(k)));
const jsonl = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => timeless(JSON.parse(l) as Record<string, unknown>));

function walk(dir: string): string[] {
  const names: string[] = [];
  const visit = (d: string) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) visit(path);
      else names.push(relative(dir, path));
    }
  };
  visit(dir);
  return names.sort();
}

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

/** The SHA-256 of every weights and optimizer file under `dir`, by relative path. */
const tensorFiles = (dir: string) =>
  Object.fromEntries(
    walk(dir)
      .filter((n) => n.endsWith('.safetensors'))
      .map((n) => [n, sha256(join(dir, n))]),
  );

/**
 * trainer_state.json of every checkpoint under `dir`, without the run's id and name (its folder)
 * and, before `last`, without the run's length (`steps` / `maxSteps`: the stopped process was
 * started as a 2-step run; from the resume on it is the 3-step run, and `last` is compared whole;
 * null: every state whole).
 */
const trainerStates = (dir: string, last: string | null) =>
  Object.fromEntries(
    walk(dir)
      .filter((n) => n.endsWith('trainer_state.json'))
      .map((n) => {
        const {
          runId: _id,
          runName: _name,
          ...state
        } = JSON.parse(readFileSync(join(dir, n), 'utf8')) as Record<string, unknown>;
        if (last !== null && !n.startsWith(last + '/')) {
          const { steps: _s, maxSteps: _m, ...config } = state.config as Record<string, unknown>;
          state.config = config;
        }
        return [n, state];
      }),
  );

/** Everything of a run folder the parity is about (config.json aside: it records --steps 2). */
function outcome(dir: string, logs: string[], last: string | null = 'checkpoint-3') {
  return {
    files: walk(dir).filter((n) => n !== 'config.json'),
    tensors: tensorFiles(dir),
    states: trainerStates(dir, last),
    logs: Object.fromEntries(logs.map((f) => [f, jsonl(join(dir, f))])),
  };
}

// ---- log-probs of weights ----------------------------------------------------------------------

let base: LoadedModel;

// Ragged teacher-forced rows inside the tiny vocabulary (ids chosen once; no EOS needed).
const PROMPTS = [
  [5, 17, 42, 9, 31],
  [60, 3, 11],
  [8, 8, 25, 70, 2, 14],
];
const COMPLETIONS = [
  [12, 40, 7, 19],
  [33, 6],
  [21, 50, 4, 9, 15],
];

interface Weights {
  tensors: ReadonlyMap<string, Float32Array>;
  lora?: { options: LoraOptions; adapters: ReadonlyMap<string, Float32Array> };
  frozenDtype?: WeightDtype;
}

/** The teacher-forced log-probs of PROMPTS → COMPLETIONS under these weights, as one list. */
async function logprobs(w: Weights): Promise<number[]> {
  const engine = await testEngine();
  const policy = GpuLlama.load(engine, base.hf.config, w.tensors, {
    lora: w.lora && { ...w.lora.options, adapters: w.lora.adapters },
    frozenDtype: w.frozenDtype,
  });
  try {
    const rows = await scoreCompletions(engine, policy, PROMPTS, COMPLETIONS, {
      padId: base.tokenizer.padTokenId,
    });
    const all = rows.flatMap((r) => Array.from(r));
    expect(all.every((x) => Number.isFinite(x) && x < 0)).toBe(true);
    return all;
  } finally {
    policy.destroy();
  }
}

const maxAbsDiff = (a: number[], b: number[]) => {
  expect(a).toHaveLength(b.length);
  return Math.max(...a.map((x, i) => Math.abs(x - b[i])));
};

/** A checkpoint folder's trained tensors (every weight, or a LoRA run's adapters) via the codec. */
function checkpointWeights(dir: string) {
  const { payload } = checkpointFromFiles((name) => new Uint8Array(readFileSync(join(dir, name))));
  return { payload, weights: payloadToSnapshot(payload).weights };
}

// ---- the runs ----------------------------------------------------------------------------------

const TRAIN_ARGS = (dir: string, steps: number, extra: string[]) => [
  ...['--model', modelDir, '--task', 'countdown'],
  ...['--task-options', '{"numbers":3,"maxNumber":10,"maxTarget":100}'],
  ...['--per-step-prompts', '1', '--num-generations', '4', '--max-completion-length', '8'],
  ...['--max-prompt-length', '120', '--eval-prompts', '0', '--learning-rate', '1e-2'],
  ...['--lr-scheduler', 'constant', '--beta', '0.04', '--save-steps', '1'],
  ...['--reward-file', `digits=${rewardFile}`, '--steps', String(steps), '--out', dir],
  ...extra,
];

interface TrainKind {
  name: string;
  extra: string[];
  /** The weights file of a checkpoint. */
  weights: string;
  frozenDtype?: WeightDtype;
}

const KINDS: TrainKind[] = [
  {
    name: 'full fine-tune, f32',
    extra: ['--num-iterations', '2'],
    weights: 'model.safetensors',
  },
  {
    name: 'LoRA on an f32 base',
    extra: ['--use_peft', '--lora_r', '2', '--lora_alpha', '4'],
    weights: 'adapter_model.safetensors',
    frozenDtype: 'f32',
  },
  {
    name: 'LoRA on a bf16 base',
    extra: ['--use_peft', '--lora_r', '2', '--lora_alpha', '4', '--dtype', 'bfloat16'],
    weights: 'adapter_model.safetensors',
    frozenDtype: 'bf16',
  },
];

/**
 * `npm run train` of `kind` for 3 steps uninterrupted, and for 2 steps then resumed from
 * checkpoint-2 in a fresh process for the third (both exporting at the end); the folders must
 * be equal. Returns the resumed run's last checkpoint and export folders.
 */
async function trainParity(kind: TrainKind, tag: string) {
  const ref = join(work, `${tag}-ref`);
  const split = join(work, `${tag}-split`);
  const refExport = join(work, `${tag}-ref-export`);
  const exportDir = join(work, `${tag}-export`);
  await Promise.all([
    ok('train', [...TRAIN_ARGS(ref, 3, kind.extra), '--export', refExport]),
    ok('train', TRAIN_ARGS(split, 2, kind.extra)),
  ]);
  expect(walk(split).filter((n) => n.startsWith('checkpoint-3'))).toEqual([]);
  const resumed = await ok('train', [
    ...['--resume', join(split, 'checkpoint-2'), '--steps', '3'],
    ...['--export', exportDir],
  ]);
  expect(resumed.out).toMatch(/resumed from .*checkpoint-2 at step 2/);

  const logs = ['metrics.jsonl', 'samples.jsonl'];
  const expected = outcome(ref, logs);
  expect(outcome(split, logs)).toEqual(expected);
  // The weights and optimizer files themselves, and what the state says.
  for (const file of [kind.weights, 'optimizer.safetensors'])
    expect(readFileSync(join(split, 'checkpoint-3', file))).toEqual(
      readFileSync(join(ref, 'checkpoint-3', file)),
    );
  const state = expected.states[join('checkpoint-3', 'trainer_state.json')];
  const mu = kind.extra.includes('--num-iterations') ? 2 : 1;
  expect([state.step, state.optimizerStep]).toEqual([3, 3 * mu]);
  // Every step trained (a run that did not move would make the comparison vacuous).
  const rows = expected.logs['metrics.jsonl'];
  expect(rows.map((r) => r.step)).toEqual([1, 2, 3]);
  for (const r of rows) {
    expect(r.grad_norm as number).toBeGreaterThan(0);
    expect(r.reward_std as number).toBeGreaterThan(0);
  }
  // Each step moved the weights and the moments: no two checkpoint files have the same bytes.
  expect(new Set(Object.values(tensorFiles(ref))).size).toBe(Object.keys(expected.tensors).length);
  // The exports of both runs are the same files, byte for byte.
  expect(Object.fromEntries(walk(exportDir).map((n) => [n, sha256(join(exportDir, n))]))).toEqual(
    Object.fromEntries(walk(refExport).map((n) => [n, sha256(join(refExport, n))])),
  );
  return { checkpoint: join(split, 'checkpoint-3'), exportDir };
}

beforeAll(async () => {
  execFileSync(
    'npx',
    ['vite', 'build', '--mode', 'cli', '--logLevel', 'warn', '--outDir', BUILD, '--emptyOutDir'],
    { stdio: 'inherit' },
  );
  (await tinyHfFolder({ maxPositions: 256 })).writeTo(modelDir);
  base = await loadModel(modelDir);
  writeFileSync(rewardFile, DIGITS);
  writeFileSync(
    sftData,
    [
      { prompt: 'Using the numbers [3, 5],', completion: ' <answer> 3 + 5 </answer>' },
      { prompt: 'Using the numbers [2, 4],', completion: ' <answer> 2 * 4 </answer>' },
      { prompt: 'Using the numbers [6, 1],', completion: ' <answer> 6 - 1 </answer>' },
      { prompt: 'Using the numbers [9, 3],', completion: ' <answer> 9 / 3 </answer>' },
    ]
      .map((r) => JSON.stringify(r) + '\n')
      .join(''),
  );
  // tests/support/two-stage-recipe.ts (the recipe the worker and page parity tests run), its GRPO
  // stage with the digits reward and short completions so that its updates move the weights.
  const [sft, grpo] = TWO_STAGE.stages;
  writeFileSync(
    recipeFile,
    JSON.stringify({
      ...TWO_STAGE,
      stages: [
        sft,
        {
          ...grpo,
          options: {
            ...grpo.options,
            maxCompletionLength: 8,
            learningRate: 0.01,
            beta: 0.04,
            rewards: ['custom:digits'],
            customRewards: { digits: DIGITS },
          },
        },
      ],
    }),
  );
}, 300_000);

describe(
  'the command line resumes every kind of run exactly',
  { timeout: 900_000, concurrent: true },
  () => {
    it('train, full fine-tune in f32: resumed = uninterrupted; --export gives the checkpoint’s log-probs', async () => {
      const { checkpoint, exportDir } = await trainParity(KINDS[0], 'full');
      const { weights } = checkpointWeights(checkpoint);
      const exported = await loadHfFolder(folderSource(exportDir));
      for (const [name, data] of weights) expect(exported.tensors.get(name), name).toEqual(data);
      const trained = await logprobs({ tensors: weights });
      expect(await logprobs({ tensors: exported.tensors })).toEqual(trained);
      // The base model's differ: the checkpoint holds trained weights.
      expect(maxAbsDiff(await logprobs({ tensors: base.hf.tensors }), trained)).toBeGreaterThan(
        1e-3,
      );
    });

    for (const [i, tag] of [
      [1, 'lora-f32'],
      [2, 'lora-bf16'],
    ] as const) {
      const kind = KINDS[i];
      it(`train, ${kind.name}: resumed = uninterrupted; adapter/ and the merged folder give the checkpoint’s log-probs`, async () => {
        const { checkpoint, exportDir } = await trainParity(kind, tag);
        const { payload, weights } = checkpointWeights(checkpoint);
        expect(payload.adapter).not.toBeNull();
        const frozenDtype = kind.frozenDtype;
        const trained = await logprobs({
          tensors: base.hf.tensors,
          lora: { options: payload.adapter!, adapters: weights },
          frozenDtype,
        });
        // The PEFT folder: the same adapters, so the same log-probs bit for bit.
        const peft = parsePeftAdapter(
          {
            config: readFileSync(join(exportDir, 'adapter', PEFT_CONFIG_FILE)),
            weights: readFileSync(join(exportDir, 'adapter', PEFT_WEIGHTS_FILE)),
          },
          base.hf.config,
        );
        // (PEFT's config lists the projections 'all-linear' stands for.)
        const { targetModules, ...options } = peft.options;
        const { targetModules: trainedTargets, ...trainedOptions } = payload.adapter!;
        expect(options).toEqual(trainedOptions);
        expect(loraTargets(targetModules)).toEqual(loraTargets(trainedTargets));
        expect([...peft.adapters.keys()].sort()).toEqual([...weights.keys()].sort());
        for (const [name, data] of weights) expect(peft.adapters.get(name), name).toEqual(data);
        expect(
          await logprobs({
            tensors: base.hf.tensors,
            lora: { options: peft.options, adapters: peft.adapters },
            frozenDtype,
          }),
        ).toEqual(trained);
        // The merged folder (f32, loads without PEFT): the same function, other roundings.
        const merged = await loadHfFolder(folderSource(exportDir));
        const diff = maxAbsDiff(await logprobs({ tensors: merged.tensors }), trained);
        console.log(`${kind.name}: merged folder vs base + adapters, max |Δ log p| = ${diff}`);
        expect(diff).toBeLessThanOrEqual(MERGED_ATOL);
        // The adapters matter far beyond that tolerance (the comparison is not vacuous).
        const bare = await logprobs({ tensors: base.hf.tensors, frozenDtype });
        expect(maxAbsDiff(bare, trained)).toBeGreaterThan(100 * MERGED_ATOL);
        if (frozenDtype === 'bf16') {
          // The trained model is the bf16-rounded base with the adapters: the f32 base with them is
          // another model beyond the tolerance (a merge into the unrounded base would fail above).
          const unrounded = await logprobs({
            tensors: base.hf.tensors,
            lora: { options: payload.adapter!, adapters: weights },
          });
          expect(maxAbsDiff(unrounded, trained)).toBeGreaterThan(10 * MERGED_ATOL);
        }
      });
    }

    it('sft: --max-steps 2, then --resume checkpoint-2 --max-steps 3 = 3 steps uninterrupted', async () => {
      const args = (dir: string, steps: number) => [
        ...['--model', modelDir, '--data', sftData, '--out', dir],
        ...['--per-device-train-batch-size', '2', '--learning-rate', '1e-2'],
        ...['--lr-scheduler-type', 'constant', '--save-steps', '1', '--max-steps', String(steps)],
      ];
      const ref = join(work, 'sft-ref');
      const split = join(work, 'sft-split');
      await Promise.all([ok('sft', args(ref, 3)), ok('sft', args(split, 2))]);
      const resumed = await ok('sft', [
        ...['--resume', join(split, 'checkpoint-2'), '--max-steps', '3'],
      ]);
      expect(resumed.out).toMatch(/resumed from .*checkpoint-2 at step 2/);
      const expected = outcome(ref, ['metrics.jsonl']);
      expect(outcome(split, ['metrics.jsonl'])).toEqual(expected);
      for (const file of ['model.safetensors', 'optimizer.safetensors'])
        expect(readFileSync(join(split, 'checkpoint-3', file))).toEqual(
          readFileSync(join(ref, 'checkpoint-3', file)),
        );
      expect(readFileSync(join(split, 'final-model', 'model.safetensors'))).toEqual(
        readFileSync(join(ref, 'final-model', 'model.safetensors')),
      );
      const state = expected.states[join('checkpoint-3', 'trainer_state.json')];
      expect([state.step, state.optimizerStep]).toEqual([3, 3]);
      const rows = expected.logs['metrics.jsonl'];
      expect(rows.map((r) => [r.step, r.epoch])).toEqual([
        [1, 0.5],
        [2, 1],
        [3, 1.5],
      ]);
      for (const r of rows) expect(r.grad_norm as number).toBeGreaterThan(0);
    });

    it('recipe SFT → GRPO: stopped at the stage boundary and inside GRPO, resumed = uninterrupted', async () => {
      const ref = join(work, 'recipe-ref');
      const split = join(work, 'recipe-split');
      const resume = ['--resume', split, '--model', modelDir];
      const [, boundary] = await Promise.all([
        ok('recipe', [recipeFile, '--model', modelDir, '--out', ref]),
        // Stopped once the SFT stage is done (timeline step 2: its state.json).
        cli('recipe', [recipeFile, '--model', modelDir, '--out', split], {
          GRPO_TEST_KILL_AFTER_WRITE: `rename ${split}/state.json`,
        }),
      ]);
      expect(boundary.signal, boundary.err).toBe('SIGKILL');
      expect(JSON.parse(readFileSync(join(split, 'state.json'), 'utf8')).stageIndex).toBe(1);
      // Resumed at the start of GRPO, stopped after its first checkpoint (timeline step 3).
      const inside = await cli('recipe', resume, {
        GRPO_TEST_KILL_AFTER_WRITE: `rename ${split}/1-rl/checkpoint-1/`,
      });
      expect(inside.signal, inside.err).toBe('SIGKILL');
      expect(inside.out).toContain("resuming 'two-stage' at stage 2/2 (rl) from its start");
      const end = await ok('recipe', resume);
      expect(end.out).toContain(
        `resuming 'two-stage' at stage 2/2 (rl) from ${join(split, '1-rl', 'checkpoint-1')}`,
      );

      const read = (dir: string) => {
        const state = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as {
          timeline: { metrics: Record<string, unknown> }[];
          results: Record<string, unknown>[];
        };
        return {
          ...outcome(dir, ['metrics.jsonl'], null),
          timeline: state.timeline.map((r) => ({ ...r, metrics: timeless(r.metrics) })),
          results: state.results.map(({ seconds: _s, last, ...r }) => ({
            ...r,
            last: last && timeless(last as Record<string, unknown>),
          })),
        };
      };
      const expected = read(ref);
      expect(read(split)).toEqual(expected);
      expect(readFileSync(join(split, 'final-model', 'model.safetensors'))).toEqual(
        readFileSync(join(ref, 'final-model', 'model.safetensors')),
      );
      const rows = expected.logs['metrics.jsonl'];
      expect(rows.map((r) => [r.step, r.stage_name, r.stage_step])).toEqual([
        [1, 'cold-start', 1],
        [2, 'cold-start', 2],
        [3, 'rl', 1],
        [4, 'rl', 2],
      ]);
      for (const r of rows) expect(r.grad_norm as number).toBeGreaterThan(0);
    });
  },
);
