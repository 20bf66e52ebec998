// `npm run sft` as a user runs it (the built dist-cli/sft.js) on the tiny Hugging Face folder: two
// steps on a repeated tiny set write metrics.jsonl with TRL's keys, finite values and a falling
// loss, a checkpoint per step and final-model/; a resume from checkpoint-1 trains step 2 again to
// the same metrics; bad input exits 1 with a message. On a bitsandbytes 4-bit folder a full
// fine-tune is refused, and --use-peft (QLoRA) trains adapters: adapter-only checkpoints, a merged
// final model with the PEFT adapter beside it, and an exact resume.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { tinyHfFolder } from '../support/tiny-hf-model';

const work = mkdtempSync(join(tmpdir(), 'grpo-cli-sft-'));
const modelDir = join(work, 'model');
const data = join(work, 'data.jsonl');

function sft(args: string[]) {
  const result = spawnSync(process.execPath, ['dist-cli/sft.js', ...args], {
    encoding: 'utf8',
    timeout: 240_000,
  });
  return { status: result.status, out: result.stdout, err: result.stderr };
}

const metrics = (dir: string) =>
  readFileSync(join(dir, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, number | null>);

beforeAll(async () => {
  execFileSync('npx', ['vite', 'build', '--mode', 'cli', '--logLevel', 'warn'], {
    stdio: 'inherit',
  });
  (await tinyHfFolder()).writeTo(modelDir);
  writeFileSync(
    data,
    [
      { prompt: 'Using the numbers [3, 5],', completion: ' <answer> 3 + 5 </answer>' },
      { prompt: 'Using the numbers [2, 4],', completion: ' <answer> 2 * 4 </answer>' },
    ]
      .map((r) => JSON.stringify(r))
      .join('\n') + '\n{"oops": 1}\n',
  );
}, 300_000);

describe('npm run sft', { timeout: 600_000 }, () => {
  const out = join(work, 'run');
  const ARGS = [
    ...['--model', modelDir, '--data', data, '--out', out],
    // Both examples every step (a repeated tiny set); TRL's snake_case names work too.
    ...['--per-device-train-batch-size', '2', '--max_steps', '2', '--learning_rate', '1e-2'],
    ...['--lr-scheduler-type', 'constant', '--save-steps', '1'],
  ];

  it('two steps: metrics.jsonl with TRL keys, a falling loss, checkpoints, final-model', () => {
    const r = sft(ARGS);
    expect(r.err).toBe('');
    expect(r.status).toBe(0);
    expect(r.out).toContain('data.jsonl line 3: skipped');
    // Planned before anything is allocated (planSftMemory), as npm run train plans a run.
    expect(r.out).toMatch(/memory plan: [\d.]+ (KiB|MiB) at peak/);
    const rows = metrics(out);
    expect(rows.map((row) => row.step)).toEqual([1, 2]);
    for (const row of rows) {
      for (const key of [
        'loss',
        'mean_token_accuracy',
        'num_tokens',
        'learning_rate',
        'grad_norm',
        'epoch',
      ])
        expect(Number.isFinite(row[key]), key).toBe(true);
      expect(row.skipped).toBeNull();
      expect(row.learning_rate).toBe(1e-2);
    }
    expect(rows[1].loss!).toBeLessThan(rows[0].loss!);
    expect(rows[1].num_tokens).toBe(2 * rows[0].num_tokens!);
    expect(rows.map((row) => row.epoch)).toEqual([1, 2]);
    for (const dir of ['checkpoint-1', 'checkpoint-2', 'final-model'])
      expect(existsSync(join(out, dir, 'model.safetensors')), dir).toBe(true);
    const config = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
    expect(config).toMatchObject({
      learning_rate: 1e-2,
      per_device_train_batch_size: 2,
      max_steps: 2,
    });
    console.log(`sft CLI losses: ${rows.map((row) => row.loss).join(', ')}`);
  });

  it('resume from checkpoint-1 trains step 2 again to the same metrics', () => {
    const before = metrics(out);
    const r = sft(['--resume', join(out, 'checkpoint-1')]);
    expect(r.status).toBe(0);
    expect(r.out).toContain('resumed from');
    expect(metrics(out)).toEqual(before);
  });

  it('bad input exits 1 saying what to change', () => {
    const noData = sft(['--model', modelDir]);
    expect(noData.status).toBe(1);
    expect(noData.err).toContain('--data <file.jsonl> is required');
    const bad = sft([...ARGS.slice(0, 6), '--learning-rate', 'fast']);
    expect(bad.status).toBe(1);
    expect(bad.err).toContain('learning_rate: expected a number');
    const unknown = sft([...ARGS.slice(0, 6), '--num-generations', '4']);
    expect(unknown.status).toBe(1);
    expect(unknown.err).toContain("unknown argument '--num-generations'");
  });

  it('a 4-bit base: full fine-tune refused; --use-peft trains adapters (checkpoints, merged final-model + adapter/, resume)', () => {
    const bnb = 'tests/fixtures/bnb4bit/nf4';
    const qlora = join(work, 'qlora');
    const base = [
      ...['--model', bnb, '--data', data, '--per-device-train-batch-size', '2'],
      ...['--max-steps', '2', '--learning-rate', '1e-2', '--save-steps', '1'],
    ];
    const refused = sft([...base, '--out', join(work, 'full-on-nf4')]);
    expect(refused.status).toBe(1);
    expect(refused.err).toContain('4-bit (NF4) quantised');
    expect(refused.err).toContain('Turn LoRA (usePeft) on');
    const r = sft([
      ...base,
      '--out',
      qlora,
      '--use-peft',
      'true',
      '--lora-target-modules',
      'q_proj,v_proj',
    ]);
    expect(r.err).toBe('');
    expect(r.status).toBe(0);
    const rows = metrics(qlora);
    expect(rows.map((row) => row.step)).toEqual([1, 2]);
    expect(rows[1].loss!).toBeLessThan(rows[0].loss!);
    for (const dir of ['checkpoint-1', 'checkpoint-2']) {
      expect(existsSync(join(qlora, dir, 'adapter_model.safetensors')), dir).toBe(true);
      expect(existsSync(join(qlora, dir, 'model.safetensors')), dir).toBe(false);
    }
    expect(existsSync(join(qlora, 'final-model', 'model.safetensors'))).toBe(true);
    const adapterConfig = JSON.parse(
      readFileSync(join(qlora, 'final-model', 'adapter', 'adapter_config.json'), 'utf8'),
    );
    expect(adapterConfig).toMatchObject({ peft_type: 'LORA', r: 16, lora_alpha: 32 });
    expect(adapterConfig.target_modules).toEqual(['q_proj', 'v_proj']);
    const config = JSON.parse(readFileSync(join(qlora, 'config.json'), 'utf8'));
    expect(config).toMatchObject({ use_peft: true, lora_target_modules: ['q_proj', 'v_proj'] });
    const before = metrics(qlora);
    const resumed = sft(['--resume', join(qlora, 'checkpoint-1')]);
    expect(resumed.status).toBe(0);
    expect(metrics(qlora)).toEqual(before);
  });
});
