// The command lines end to end, as a user runs them: `train` writes a run folder (metrics, samples,
// an atomic checkpoint, held-out eval), `--resume` continues it, `eval` compares two models, and a
// bad option fails with a message. A tiny random Llama with the byte-level BPE test tokenizer.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { exportHfFolder } from '../../src/export/hf-export';
import type { LlamaConfig } from '../../src/core/model-config';
import { initLlamaWeights } from '../../src/model/init';

const TOKENIZER_DIR = 'tests/fixtures/tiny-tokenizer';
const work = mkdtempSync(join(tmpdir(), 'grpo-cli-'));
const modelDir = join(work, 'model');
const runDir = join(work, 'run');

const config: LlamaConfig = {
  architecture: 'LlamaForCausalLM',
  hiddenSize: 32,
  intermediateSize: 64,
  numLayers: 1,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 8,
  vocabSize: 275,
  maxPositions: 2048,
  ropeTheta: 10000,
  rmsNormEps: 1e-6,
  tieWordEmbeddings: true,
  attentionBias: false,
  bosTokenId: null,
  eosTokenIds: [0],
};

function cli(name: string, args: string[]) {
  const result = spawnSync(process.execPath, [`dist-cli/${name}.js`, ...args], {
    encoding: 'utf8',
    timeout: 300_000,
  });
  return { status: result.status, out: result.stdout, err: result.stderr };
}

const TRAIN = [
  '--task',
  'arithmetic',
  '--per-step-prompts',
  '2',
  '--num-generations',
  '2',
  '--max-completion-length',
  '4',
  '--max-prompt-length',
  '2048',
  '--eval-prompts',
  '2',
  '--learning-rate',
  '1e-3',
  '--save-steps',
  '2',
];

beforeAll(() => {
  execFileSync('npx', ['vite', 'build', '--mode', 'cli', '--logLevel', 'warn'], {
    stdio: 'inherit',
  });
  mkdirSync(modelDir, { recursive: true });
  const tokenizerFiles = new Map(
    ['tokenizer.json', 'tokenizer_config.json'].map((f) => [
      f,
      new Uint8Array(readFileSync(join(TOKENIZER_DIR, f))),
    ]),
  );
  for (const [name, bytes] of exportHfFolder({
    config,
    tensors: initLlamaWeights(config, 3),
    tokenizerFiles,
  })) {
    writeFileSync(join(modelDir, name), bytes);
  }
}, 120_000);

describe('command line', { timeout: 600_000 }, () => {
  it('train writes a run folder, resume continues it, eval compares models', () => {
    const train = cli('train', ['--model', modelDir, '--out', runDir, '--steps', '2', ...TRAIN]);
    expect(train.status, train.err).toBe(0);
    const metrics = () =>
      readFileSync(join(runDir, 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
    expect(metrics().map((m) => m.step)).toEqual([1, 2]);
    expect(Object.keys(metrics()[0])).toEqual(
      expect.arrayContaining([
        'reward',
        'loss',
        'grad_norm',
        'completions/mean_length',
        'format_rate',
      ]),
    );
    expect(readFileSync(join(runDir, 'samples.jsonl'), 'utf8').trim().split('\n')).toHaveLength(2);
    expect(readdirSync(join(runDir, 'checkpoint-2')).sort()).toEqual(
      [
        'config.json',
        'generation_config.json',
        'model.safetensors',
        'optimizer.safetensors',
        'tokenizer.json',
        'tokenizer_config.json',
        'trainer_state.json',
      ].sort(),
    );
    expect(existsSync(join(runDir, 'checkpoint-2.partial'))).toBe(false);
    const evalReport = JSON.parse(readFileSync(join(runDir, 'eval.json'), 'utf8'));
    expect(evalReport.prompts).toBe(2);
    expect(evalReport.metrics.greedy_format_rate).toBeGreaterThanOrEqual(0);

    const resume = cli('train', ['--resume', join(runDir, 'checkpoint-2'), '--steps', '3']);
    expect(resume.status, resume.err).toBe(0);
    expect(resume.out).toMatch(/resumed from .*checkpoint-2 at step 2/);
    expect(metrics().map((m) => m.step)).toEqual([1, 2, 3]);
    expect(
      JSON.parse(readFileSync(join(runDir, 'checkpoint-3', 'trainer_state.json'), 'utf8')).step,
    ).toBe(3);

    const compare = cli('eval', [
      '--model',
      join(runDir, 'checkpoint-3'),
      '--compare',
      modelDir,
      '--k',
      '1',
      '--task',
      'arithmetic',
      '--eval-prompts',
      '2',
      '--max-completion-length',
      '4',
      '--max-prompt-length',
      '2048',
    ]);
    expect(compare.status, compare.err).toBe(0);
    expect(compare.out).toMatch(/2 held-out prompts, k = 1/);
    expect(compare.out).toMatch(/greedy_accuracy\s+\d\.\d{4}\s+\d\.\d{4}/);
  });

  it('train --eval-steps logs evals.jsonl; --load-best-model-at-end writes the best weights', () => {
    const dir = join(runDir, '..', 'best-run');
    const options = ['--eval-steps', '1', '--eval-generations', '1', '--load-best-model-at-end'];
    const saveEveryStep = TRAIN.map((v, i) => (TRAIN[i - 1] === '--save-steps' ? '1' : v));
    const train = cli('train', [
      ...['--model', modelDir, '--out', dir, '--steps', '2'],
      ...saveEveryStep,
      ...options,
    ]);
    expect(train.status, train.err).toBe(0);
    const evals = readFileSync(join(dir, 'evals.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(evals.map((e) => e.step)).toEqual([1, 2]);
    for (const e of evals) {
      expect(e.eval_accuracy).toBeGreaterThanOrEqual(0);
      expect(e.eval_accuracy).toBeLessThanOrEqual(1);
      expect(e.eval_mean_length).toBeGreaterThan(0);
    }
    const top = Math.max(...evals.map((e) => e.eval_accuracy));
    const best = evals.find((e) => e.eval_accuracy === top).step;
    expect(train.out).toContain(`loaded the best evaluation's weights (step ${best},`);
    // best-model/ holds exactly the weights saved at that step's checkpoint. (This random model earns
    // no reward, so its steps may not move the weights; tests/kernels/eval-during-training.test.ts
    // checks the loaded weights against a step whose weights differ from the last.)
    const weights = (folder: string) => readFileSync(join(dir, folder, 'model.safetensors'));
    expect(weights('best-model').equals(weights(`checkpoint-${best}`))).toBe(true);
  });

  it('an unknown option or a wrong type fails with a message naming it', () => {
    const unknown = cli('train', ['--model', modelDir, '--numm-generations', '4']);
    expect(unknown.status).toBe(1);
    expect(unknown.err).toMatch(/numm-generations/);
    const wrongType = cli('train', ['--model', modelDir, '--num-generations', 'many']);
    expect(wrongType.status).toBe(1);
    expect(wrongType.err).toMatch(/num[-_]?[gG]enerations/);
  });
});
