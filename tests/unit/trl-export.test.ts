// TRL export: rewards.py run with plain python3 must score a fixed set of tricky completions exactly
// as the TypeScript rewards; train_grpo.py must compile; its GRPOConfig keys must be TRL options.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configSchemaRows, resolveConfig } from '../../src/grpo/config';
import { accuracyReward, formatReward } from '../../src/grpo/rewards';
import { exportTrl } from '../../src/export/trl-export';
import { createTask, trainEvalProblems } from '../../src/tasks/index';
import { formatPrompt } from '../../src/tasks/prompt';
import type { Problem } from '../../src/tasks/types';
import type { VerifierSpec } from '../../src/tasks/verify';

const PYTHON = process.env.PYTHON ?? 'python3';

const problem = (verifier: VerifierSpec): Problem => ({
  id: 'x',
  task: 't',
  question: 'q',
  reference: null,
  verifier,
});
const CD = problem({ kind: 'countdown', nums: [44, 19, 35], target: 98 });
const CD0 = problem({ kind: 'countdown', nums: [5, 3, 3, 7], target: 7 });
const CD_REP = problem({ kind: 'countdown', nums: [3, 1, 3], target: 10 });
const CD_FRAC = problem({ kind: 'countdown', nums: [8, 3, 3], target: 8 });
const INT = problem({ kind: 'integer', answer: '-123456789012345678901234' });
const EXACT = problem({ kind: 'exact', answer: 'Paris' });
const NUM = problem({ kind: 'numeric', answer: '3.5', tolerance: 0.01 });
const CHOICE = problem({ kind: 'choice', answer: 'B' });
const NONE = problem({ kind: 'none' });

const wrap = (a: string) => `<think>reasoning</think>\n<answer>${a}</answer>`;

/** Completions × problems; each case is scored by both implementations. */
const CASES: [string, Problem][] = [
  [wrap('44 + 19 + 35'), CD],
  [' <think>\nx\n</think>\n<answer> (44 - 19) + 35 </answer>\n', CD],
  [wrap('35+19+44'), CD],
  [wrap('44 + 19 + 35') + ' trailing text', CD],
  [wrap('44 + 19 + 35') + '\u00a0', CD],
  ['\u2003' + wrap('44 + 19 + 35'), CD],
  [wrap('44 + 19 + 35\u00a0'), CD],
  [wrap('44 + 19 + 35\u3000'), CD],
  ['<think><think>nested</think></think><answer>44+19+35</answer>', CD],
  ['<think>x</think><answer><answer>44+19+35</answer></answer>', CD],
  ['<think>x</think><answer>1</answer><answer>44+19+35</answer>', CD],
  ['<answer>44+19+35</answer><think>x</think>', CD],
  ['<THINK>x</THINK><ANSWER>44+19+35</ANSWER>', CD],
  ['<think>ünïcödé 🤔 wait</think><answer>44 + 19 + 35</answer>', CD],
  [wrap('44 + 19 + 35 = 98'), CD],
  [wrap('44 × 19 + 35'), CD],
  [wrap('44 − 19 + 35'), CD],
  [wrap('44 + 44 + 19 + 35'), CD],
  [wrap('44 + 19'), CD],
  [wrap('(44 + 19 + 35'), CD],
  [wrap('44 + 19 + 35)'), CD],
  [wrap('044 + 19 + 35'), CD],
  [wrap('44 ** 1 + 19 + 35'), CD],
  [wrap('44 // 1 + 19 + 35'), CD],
  [wrap('44.0 + 19 + 35'), CD],
  [wrap('-44 + 19 + 35'), CD],
  [wrap('44 - -19 + 35'), CD],
  [wrap('44 19 35'), CD],
  [wrap('٤٤ + 19 + 35'), CD], // Arabic-Indic digits: Python's int() would accept them
  [wrap(''), CD],
  [wrap('('.repeat(64) + '44+19+35' + ')'.repeat(64)), CD],
  [wrap('('.repeat(65) + '44+19+35' + ')'.repeat(65)), CD],
  [wrap('5 / (3 - 3) + 7'), CD0],
  [wrap('7 + 5 / 0'), problem({ kind: 'countdown', nums: [7, 5, 0], target: 7 })],
  [wrap('(5 - 3) * 3 - 3 + 7 - 5'), CD0],
  [wrap('5 * 3 / 3 + 7 - 5'), CD0],
  [wrap('3 * 3 + 1'), CD_REP],
  [wrap('(8 / 3) * 3'), CD_FRAC],
  [wrap('8 / 3 + 3'), CD_FRAC],
  [wrap('9'.repeat(101) + ' + 1'), problem({ kind: 'countdown', nums: [1], target: 1 })],
  ['no tags at all 44+19+35', CD],
  ['<think>x</think><answer>unclosed 44+19+35', CD],
  [wrap('-123456789012345678901234'), INT],
  [wrap(' -123456789012345678901234\n'), INT],
  [wrap('-123,456,789,012,345,678,901,234'), INT],
  [wrap('-123456789012345678901235'), INT],
  [wrap('١٢٣'), problem({ kind: 'integer', answer: '123' })],
  [wrap('1'.repeat(1001)), problem({ kind: 'integer', answer: '1' })],
  [wrap('Paris'), EXACT],
  [wrap(' Paris\t'), EXACT],
  [wrap('paris'), EXACT],
  [wrap('\u00a0Paris'), EXACT],
  [wrap('3.509'), NUM],
  [wrap('3.52'), NUM],
  [wrap('35e-1'), NUM],
  [wrap('1e999'), NUM],
  [wrap('Infinity'), NUM],
  [wrap('3_5'), NUM],
  [wrap('(b)'), CHOICE],
  [wrap('B.'), CHOICE],
  [wrap('(B'), CHOICE],
  [wrap('B is right'), CHOICE],
  [wrap('anything'), NONE],
  ['', NONE],
];

let dir: string;
let files: Map<string, string>;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'trl-export-'));
  const config = resolveConfig({
    steps: 3,
    perStepPrompts: 2,
    evalPrompts: 4,
    warmupRatio: 0.1,
    epsilonHigh: 0.28,
    rewards: ['format', 'accuracy', 'custom:len-bonus'],
    customRewards: {
      'len-bonus':
        '({ completion }) => {\n  return completion.length < 200 ? 0.1 : 0; // short is good\n}',
    },
    rewardWeights: [0.5, 1, 0.25],
  });
  const task = createTask(config.task, config.taskOptions);
  const { train, eval: held } = trainEvalProblems(task, config.seed, 6, 4);
  files = exportTrl(config, { trainPrompts: train, evalPrompts: held });
  for (const [name, text] of files) writeFileSync(join(dir, name), text);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('exported rewards.py', () => {
  it('scores every case exactly as the TypeScript rewards', () => {
    const accuracy = accuracyReward();
    const expected = CASES.map(([completion, p]) => ({
      format: formatReward.compute({ completion, prompt: '', problem: p }),
      accuracy: accuracy.compute({ completion, prompt: '', problem: p }),
    }));
    const script = [
      'import json, sys',
      'sys.path.insert(0, sys.argv[1])',
      'import rewards',
      'cases = json.load(sys.stdin)',
      'completions = [c["completion"] for c in cases]',
      'verifier = [c["verifier"] for c in cases]',
      'f = rewards.format_reward(prompts=None, completions=completions, verifier=verifier)',
      'a = rewards.accuracy_reward(prompts=None, completions=completions, verifier=verifier)',
      'chat = rewards.format_reward(completions=[[{"role": "assistant", "content": c}] for c in completions])',
      'assert chat == f',
      'print(json.dumps([{"format": x, "accuracy": y} for x, y in zip(f, a)]))',
    ].join('\n');
    const input = JSON.stringify(
      CASES.map(([completion, p]) => ({ completion, verifier: JSON.stringify(p.verifier) })),
    );
    const out = execFileSync(PYTHON, ['-c', script, dir], { input, encoding: 'utf8' });
    const actual = JSON.parse(out) as { format: number; accuracy: number | null }[];
    expect(actual).toHaveLength(CASES.length);
    CASES.forEach(([completion], i) => {
      expect(actual[i], `case ${i}: ${JSON.stringify(completion)}`).toEqual(expected[i]);
    });
    // The set really exercises both outcomes of both rewards.
    expect(new Set(expected.map((e) => e.format))).toEqual(new Set([0, 1]));
    expect(new Set(expected.map((e) => e.accuracy))).toEqual(new Set([0, 1, null]));
  });

  it('lists the reward functions in config order and stubs custom JS rewards loudly', () => {
    const py = files.get('rewards.py') as string;
    expect(py).toContain('REWARD_FUNCS = [format_reward, accuracy_reward, custom_len_bonus]');
    expect(py).toContain("CUSTOM REWARD 'len-bonus': NOT PORTED");
    expect(py).toContain('#       return completion.length < 200 ? 0.1 : 0; // short is good');
    const out = execFileSync(
      PYTHON,
      [
        '-c',
        'import sys; sys.path.insert(0, sys.argv[1]); import rewards\ntry:\n    rewards.custom_len_bonus(completions=["x"])\nexcept NotImplementedError as e:\n    print("raised", e)',
        dir,
      ],
      { encoding: 'utf8' },
    );
    expect(out).toMatch(/^raised custom reward 'len-bonus' is JavaScript/);
  });
});

describe('exported project', () => {
  it('train_grpo.py and rewards.py compile', () => {
    execFileSync(PYTHON, ['-m', 'py_compile', join(dir, 'train_grpo.py'), join(dir, 'rewards.py')]);
  });

  it('every GRPOConfig keyword in train_grpo.py is a TRL option', () => {
    const options = JSON.parse(readFileSync('trl/trl_options.json', 'utf8')) as Record<
      string,
      unknown
    >;
    const known = new Set([
      ...(options.grpo_config as string[]),
      ...(options.trl_base_config as string[]),
      ...(options.training_arguments as string[]),
    ]);
    const py = files.get('train_grpo.py') as string;
    const call = /GRPOConfig\(\n([\s\S]*?)\n {4}\)/.exec(py);
    expect(call).not.toBeNull();
    const keys = [...(call as RegExpExecArray)[1].matchAll(/^ {8}([a-z0-9_]+)=/gm)].map(
      (m) => m[1],
    );
    expect(keys.length).toBeGreaterThan(20);
    for (const k of keys) expect(known.has(k), k).toBe(true);
    // Every config field with a TRL name is passed.
    for (const row of configSchemaRows()) if (row.trl) expect(keys, row.key).toContain(row.trl);
    expect(py).toContain('        warmup_steps=0.1,');
    expect(py).toContain('        epsilon_high=0.28,');
    expect(py).toContain('        reward_weights=[0.5, 1, 0.25],');
    expect(py).toContain('        loss_type="dapo",');
    // evalSteps = 0: the exported run evaluates at its checkpoints (saveSteps).
    expect(py).toContain('        eval_strategy="steps",\n        eval_steps=50,');
  });

  it('exports evalSteps as eval_steps', () => {
    const config = resolveConfig({ steps: 2, perStepPrompts: 1, evalPrompts: 2, evalSteps: 7 });
    const task = createTask(config.task, config.taskOptions);
    const { train, eval: held } = trainEvalProblems(task, config.seed, 2, 2);
    const py = exportTrl(config, { trainPrompts: train, evalPrompts: held }).get('train_grpo.py');
    expect(py).toContain('        eval_strategy="steps",\n        eval_steps=7,');
  });

  it('writes the exact prompts and verifier data, and lists unmapped options in the README', () => {
    const lines = (files.get('train.jsonl') as string)
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(6);
    const task = createTask('countdown');
    const { train } = trainEvalProblems(task, 42, 6, 4);
    lines.forEach((row, i) => {
      const f = formatPrompt(train[i], 'r1-zero');
      expect(row.prompt).toBe(f.kind === 'text' ? f.text : null);
      expect(JSON.parse(row.verifier)).toEqual(train[i].verifier);
    });
    expect((files.get('eval.jsonl') as string).trim().split('\n')).toHaveLength(4);
    const readmeText = files.get('README.md') as string;
    for (const row of configSchemaRows()) {
      expect(readmeText, row.key).toContain(`| \`${row.key}\` |`);
    }
    expect(readmeText).toContain(
      'accelerate launch --config_file accelerate_config.yaml train_grpo.py',
    );
    expect(readmeText).toContain('custom:len-bonus');
    expect(files.get('requirements.txt')).toMatch(/^trl==\d+\.\d+\.\d+$/m);
    expect(files.get('accelerate_config.yaml')).toContain('num_processes: 8');
  });

  it('exports chat prompts as conversations', () => {
    const config = resolveConfig({ template: 'chat', steps: 1, perStepPrompts: 1, evalPrompts: 0 });
    const p = createTask('arithmetic').generate(1, 1);
    const out = exportTrl(config, { trainPrompts: p, evalPrompts: [] });
    const row = JSON.parse((out.get('train.jsonl') as string).trim());
    expect(row.prompt).toEqual([
      {
        role: 'system',
        content: expect.stringContaining('<think> reasoning process here </think>'),
      },
      { role: 'user', content: p[0].question },
    ]);
    expect(out.has('eval.jsonl')).toBe(false);
    expect(out.get('train_grpo.py')).toContain('CONVERSATIONAL = True');
  });
});
