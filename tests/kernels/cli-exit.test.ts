// The built command line as a user runs it, on how it ends and what it leaves on disk: a run with
// custom rewards (worker sandboxes) exits with status 0 and reports the rewards that failed; bad
// input (a missing reward file, a bad config file, too many steps, a size past its limit, prompts
// over the length limit) exits 1 with a message saying what to change; a resume from an earlier
// checkpoint logs every step once and recovers a checkpoint whose replacement was interrupted;
// `recipe --plan` prints the stages' memory plans and exits 1 when one does not fit; `aha --help`
// prints help.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { tinyHfFolder } from '../support/tiny-hf-model';

const work = mkdtempSync(join(tmpdir(), 'grpo-cli-exit-'));
const modelDir = join(work, 'model');

/** Runs dist-cli/<name>.js; `seconds` is how long it took (a hang is killed at `timeoutMs`). */
function cli(name: string, args: string[], timeoutMs = 240_000) {
  const started = performance.now();
  const result = spawnSync(process.execPath, [`dist-cli/${name}.js`, ...args], {
    encoding: 'utf8',
    timeout: timeoutMs,
  });
  return {
    status: result.status,
    signal: result.signal,
    out: result.stdout,
    err: result.stderr,
    seconds: (performance.now() - started) / 1000,
  };
}

// Countdown with small numbers: prompts of a few dozen tokens in the tiny model's vocabulary.
const TRAIN = [
  ...['--model', modelDir, '--task', 'countdown'],
  ...['--task-options', '{"numbers":3,"maxNumber":10,"maxTarget":100}'],
  ...['--per-step-prompts', '1', '--num-generations', '2', '--max-completion-length', '4'],
  ...['--max-prompt-length', '120', '--eval-prompts', '0', '--learning-rate', '1e-2'],
];

const file = (name: string, text: string) => {
  const path = join(work, name);
  writeFileSync(path, text);
  return path;
};
const steps = (dir: string, log: string) =>
  readFileSync(join(dir, log), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l).step);

beforeAll(async () => {
  execFileSync('npx', ['vite', 'build', '--mode', 'cli', '--logLevel', 'warn'], {
    stdio: 'inherit',
  });
  (await tinyHfFolder({ maxPositions: 128 })).writeTo(modelDir);
}, 120_000);

describe('the command line ends with its status', { timeout: 600_000 }, () => {
  it('a run with custom rewards exits 0 and its step line names the failing reward', () => {
    const len = file(
      'len.js',
      'function reward({ completion }) { return completion.length / 10; }',
    );
    const boom = file('boom.js', "function reward() { throw new Error('boom'); }");
    // A memory bomb fails its own calls inside the sandbox; it must not abort the process (V8's
    // out-of-memory exit 134 is what an unbounded worker_threads sandbox gave).
    const bomb = file('bomb.js', 'function reward() { return new Array(1e9).fill(0).length; }');
    const dir = join(work, 'custom');
    const run = cli('train', [
      ...TRAIN,
      ...['--out', dir, '--steps', '1'],
      ...[
        '--reward-file',
        `len=${len}`,
        `--reward-file=boom=${boom}`,
        `--reward-file=bomb=${bomb}`,
      ],
      // A generous limit: a busy machine must not turn the working reward into a timeout.
      ...['--reward-timeout-ms', '30000'],
    ]);
    expect(run.signal, `killed after ${run.seconds.toFixed(0)} s: ${run.out}`).toBe(null);
    expect(run.status, run.err).toBe(0);
    expect(run.seconds).toBeLessThan(180);
    expect(run.out).toMatch(
      /step 1\/1 .* REWARD ERRORS: custom:boom failed on 2\/2 \(threw: Error: boom/,
    );
    expect(run.out).toMatch(/custom:bomb failed on 2\/2 \(threw: InternalError: out of memory/);
    expect(run.out).not.toMatch(/custom:len failed/);
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    expect(config.rewards).toEqual([
      'format',
      'accuracy',
      'custom:len',
      'custom:boom',
      'custom:bomb',
    ]);
    expect(config.customRewards.boom).toBe("function reward() { throw new Error('boom'); }");
    const [metrics] = readFileSync(join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n');
    expect(JSON.parse(metrics).reward_error_frac).toBe(1);
  });

  it('bad input exits 1 at once with a message saying what to change', () => {
    const missing = join(work, 'nope.js');
    const noReward = cli('train', [...TRAIN, '--reward-file', `len=${missing}`]);
    expect(noReward.status).toBe(1);
    expect(noReward.err.trim()).toBe(
      `--reward-file len=${missing}: cannot read ${missing} (ENOENT)`,
    );

    const badJson = file('bad.json', '{"steps": 2,}');
    const json = cli('train', ['--config', badJson, ...TRAIN]);
    expect(json.status).toBe(1);
    expect(json.err).toMatch(new RegExp(`^${badJson}: not valid JSON \\(`));

    const unknown = file('unknown.json', '{"num_generations": 4}');
    const key = cli('train', ['--config', unknown, ...TRAIN]);
    expect(key.status).toBe(1);
    expect(key.err.trim()).toBe(
      `${unknown}: unknown config key 'num_generations' (did you mean 'numGenerations'?)`,
    );

    const tooMany = cli('train', [...TRAIN, '--steps', '10000000']);
    expect(tooMany.status).toBe(1);
    expect(tooMany.err).toMatch(/^--steps 10000000 is more than the limit of 1000000 steps/);
    // Sizes past their limits are refused before any allocation (issue 33: before, --k 1e9 ran
    // out of heap and --eval-prompts 1e8 hung).
    const hugeK = cli('rejection-sample', [
      ...['--model', modelDir, '--out', join(work, 'rs')],
      ...['--k', '1000000000', '--prompts', '1'],
    ]);
    expect(hugeK.status).toBe(1);
    expect(hugeK.err.trim()).toBe(
      '--k 1000000000 is more than the limit of 1024 completions per prompt',
    );
    const evalPrompts = cli('train', [...TRAIN, '--eval-prompts', '100000000']);
    expect(evalPrompts.status).toBe(1);
    expect(evalPrompts.err.trim()).toBe(
      '--eval-prompts 100000000 is more than the limit of 10000 prompts',
    );
    for (const r of [noReward, json, key, tooMany, hugeK, evalPrompts])
      expect(r.seconds).toBeLessThan(60);

    const long = cli('train', [...TRAIN, '--out', join(work, 'long'), '--max-prompt-length', '5']);
    expect(long.status).toBe(1);
    expect(long.err).toMatch(
      /maxPromptLength = 5 tokens: the shortest prompt is \d+ tokens; raise --max-prompt-length/,
    );
  });

  it('recipe --plan prints each stage’s memory plan and trains nothing; 1 when one does not fit', () => {
    const out = join(work, 'planned');
    const recipe = (grpo: object) =>
      file(
        'planned.json',
        JSON.stringify({
          name: 'planned',
          stages: [
            { kind: 'sft', name: 'cold', data: { coldStart: { count: 4 } } },
            { kind: 'rejection-sample', name: 'rs', prompts: 2, options: { k: 1 } },
            { kind: 'sft', name: 'distil', from: 'base', data: { stage: 'rs' } },
            { kind: 'grpo', name: 'rl', from: 'cold', options: grpo },
          ],
        }),
      );
    const fits = cli('recipe', [recipe({ steps: 1 }), '--plan', '--model', modelDir, '--out', out]);
    expect(fits.status).toBe(0);
    const lines = fits.out.trim().split('\n').slice(1);
    expect(lines[0]).toMatch(/^memory plans of 'planned' \(budget [\d.]+ GiB\):$/);
    expect(lines.slice(1).map((l) => l.replace(/[\d.]+ (KiB|MiB)/, 'X'))).toEqual([
      "  stage 1/4: sft 'cold': X at peak, fits",
      "  stage 2/4: rejection-sample 'rs': samples, trains nothing",
      "  stage 3/4: sft 'distil': planned when it starts (its start is not known yet)",
      "  stage 4/4: grpo 'rl': X at peak, fits",
    ]);
    expect(existsSync(out)).toBe(false);
    const over = cli('recipe', [
      ...[recipe({ perStepPrompts: 1024, numGenerations: 64 }), '--plan'],
      ...['--model', modelDir, '--out', out],
    ]);
    expect(over.status).toBe(1);
    expect(over.out).toMatch(
      / {2}stage 4\/4: grpo 'rl': [\d.]+ GiB at peak, does not fit\n {4}Does not fit: N = 1024×64/,
    );
  });

  it('aha --help prints the help instead of starting the demo', () => {
    const help = cli('aha', ['--help'], 60_000);
    expect(help.status).toBe(0);
    expect(help.out).toMatch(/^usage: npm run aha -- \[flags\] \[options\]/);
    expect(help.out).toContain('--seeds <1,2,3>');
    expect(help.seconds).toBeLessThan(30);
  });
});

describe('resume keeps the run folder consistent', { timeout: 600_000 }, () => {
  it('every step logged once, an interrupted checkpoint replacement recovered', () => {
    const dir = join(work, 'resume');
    const first = cli('train', [...TRAIN, '--out', dir, '--steps', '3', '--save-steps', '2']);
    expect(first.status, first.err).toBe(0);
    expect(steps(dir, 'metrics.jsonl')).toEqual([1, 2, 3]);
    // A save killed between moving checkpoint-2 aside and moving its replacement in, and a
    // half-written checkpoint-3.
    renameSync(join(dir, 'checkpoint-2'), join(dir, 'checkpoint-2.old'));
    mkdirSync(join(dir, 'checkpoint-3.partial'));
    writeFileSync(join(dir, 'checkpoint-3.partial', 'model.safetensors'), 'torn');

    const resume = cli('train', ['--resume', join(dir, 'checkpoint-2'), '--steps', '4']);
    expect(resume.status, resume.err).toBe(0);
    expect(resume.out).toContain(`restored ${join(dir, 'checkpoint-2')} from`);
    expect(resume.out).toMatch(/resumed from .*checkpoint-2 at step 2/);
    expect(resume.out).toContain('metrics.jsonl: removed 1 row after step 2');
    expect(steps(dir, 'metrics.jsonl')).toEqual([1, 2, 3, 4]);
    expect(steps(dir, 'samples.jsonl')).toEqual([1, 2, 3, 4]);
    expect(readdirSync(dir).sort()).toEqual(
      [
        'checkpoint-2',
        'checkpoint-3',
        'checkpoint-4',
        'config.json',
        'metrics.jsonl',
        'samples.jsonl',
      ].sort(),
    );
    expect(
      JSON.parse(readFileSync(join(dir, 'checkpoint-4', 'trainer_state.json'), 'utf8')).step,
    ).toBe(4);
  });
});
