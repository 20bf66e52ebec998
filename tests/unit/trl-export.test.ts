// TRL export: rewards.py run with plain python3 must score a fixed set of tricky completions exactly
// as the TypeScript rewards (language consistency too, in several scripts); train_grpo.py must compile; its GRPOConfig keys must be TRL options.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configSchemaRows, resolveConfig } from '../../src/grpo/config';
import {
  accuracyReward,
  formatReward,
  languageConsistencyRewardFunction,
} from '../../src/rewards/rewards';
import { exportTrl } from '../../src/export/trl-export';
import { rewardsPy } from '../../src/export/trl-templates/rewards-py';
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
const MATH = problem({ kind: 'math', answer: '\\frac{14}{3}' });
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
  [wrap('\\boxed{\\dfrac{28}{6}}'), MATH],
  [wrap('4.67'), MATH],
  [wrap('\\left(\\frac{14}{3}\\right)'), MATH],
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
      'import json, os, sys',
      'os.environ["GRPO_MATH_CHECKER"] = "rules"',
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

  it("judges the model's whole turn after a template's think markup, as the TypeScript reward", () => {
    // (prompt, completion): text prompts reach TRL's reward functions as they are; chat prompts
    // as messages, which rewards.py renders with the run's tokenizer (use_chat_template). The
    // stand-in tokenizer below renders them as Qwen3's template does with enable_thinking False
    // (an empty think block); transformers is not installed here.
    const QWEN3_OFF =
      '<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n';
    const PAIRS: [string, string][] = [
      ['Question.<think>\n', ' 2 + 2 </think> <answer> 4 </answer>'], // opened in the prompt
      ['Question.<think>\n', '<think> x </think> <answer> 4 </answer>'], // the completion's own
      ['Question.<think>\n', '<answer> 4 </answer>'], // no </think>
      ['Question. Assistant:', ' 2 + 2 </think> <answer> 4 </answer>'], // no markup: judged alone
      ['Say <think> and </think>, then answer.', '<answer> 4 </answer>'], // quoted mid-text
      [QWEN3_OFF, '<answer> 4 </answer>'], // Qwen3's empty block
      [QWEN3_OFF, '<think> x </think> <answer> 4 </answer>'],
    ];
    const expected = PAIRS.map(([prompt, completion]) =>
      formatReward.compute({ completion, prompt, problem: NONE }),
    );
    expect(expected).toEqual([1, 1, 0, 0, 0, 1, 1]);
    const script = [
      'import json, sys',
      'sys.path.insert(0, sys.argv[1])',
      'import rewards',
      'pairs = json.load(sys.stdin)',
      'text = rewards.format_reward(prompts=[p for p, _ in pairs], completions=[c for _, c in pairs])',
      'class Qwen3ThinkingOff:',
      '    def apply_chat_template(self, messages, tokenize, add_generation_prompt, **kwargs):',
      '        assert not tokenize and add_generation_prompt and kwargs == {"enable_thinking": False}',
      `        return ${JSON.stringify(QWEN3_OFF)} if messages[-1]["content"] == "q" else "x"`,
      'rewards.use_chat_template(Qwen3ThinkingOff(), {"enable_thinking": False})',
      'chat = rewards.format_reward(',
      '    prompts=[[{"role": "user", "content": "q"}]] * 2,',
      '    completions=[[{"role": "assistant", "content": c}] for _, c in pairs[-2:]],',
      ')',
      'print(json.dumps([text, chat]))',
    ].join('\n');
    const out = execFileSync(PYTHON, ['-c', script, dir], {
      input: JSON.stringify(PAIRS),
      encoding: 'utf8',
    });
    expect(JSON.parse(out)).toEqual([expected, expected.slice(-2)]);
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

describe('exported language_consistency_reward', () => {
  const SCRIPTS = ['Latin', 'Han', 'Hiragana', 'Cyrillic', 'Greek'] as const;
  /** Mixed scripts, marks, apostrophes, digits in words, characters newer than Python's Unicode
   * tables (U+31350, CJK Extension H, Unicode 15), lone surrogates; chain of thought only. */
  const TEXTS = [
    '<think>so 3 + 4: add, потом проверим then</think><answer>seven</answer>',
    '<think>helloмир world</think>',
    '<think>計算します check コーヒー</think>',
    '<think>先加后减 then 检查 \u{31350}\u{31351}</think>',
    "<think>l'été déjà fini, it’s e\u0301 well-known x2 ª ｆｕｌｌ</think>",
    '<think>αβγ µ Ωmega ΣΥΝ</think>',
    '<think>3 + 4 = 7 ٤٤ 🤔</think><answer>no words</answer>',
    '<think>unclosed Привет and more',
    'no tags: add them <answer>7</answer> after',
    '</think> only a close: done',
    '<think>a\ud800b c\udc00</think>',
    '',
    '<think>ﬁne ǅemal Ⅻ ⅻ 𝐀𝐁 𐐀</think>',
  ];

  it('scores every text exactly as the TypeScript reward, for several target scripts', () => {
    const lcDir = mkdtempSync(join(tmpdir(), 'trl-lc-'));
    try {
      for (const script of SCRIPTS) {
        const py = rewardsPy({
          rewards: ['language_consistency'],
          custom: [],
          languageScript: script,
        });
        expect(py).toContain(`LANGUAGE_SCRIPT = "${script}"`);
        expect(py).toContain('REWARD_FUNCS = [language_consistency_reward]');
        writeFileSync(join(lcDir, `rewards_${script.toLowerCase()}.py`), py);
      }
      const script = [
        'import importlib, json, sys',
        'sys.path.insert(0, sys.argv[1])',
        'texts = json.load(sys.stdin)',
        'out = {}',
        'for name in sys.argv[2:]:',
        '    m = importlib.import_module("rewards_" + name.lower())',
        '    plain = m.language_consistency_reward(prompts=None, completions=texts)',
        '    chat = m.language_consistency_reward(completions=[[{"role": "assistant", "content": t}] for t in texts])',
        '    assert chat == plain',
        '    out[name] = plain',
        'print(json.dumps(out))',
      ].join('\n');
      const out = execFileSync(PYTHON, ['-c', script, lcDir, ...SCRIPTS], {
        input: JSON.stringify(TEXTS),
        encoding: 'utf8',
      });
      const actual = JSON.parse(out) as Record<string, (number | null)[]>;
      const seen = new Set<number | null>();
      for (const script of SCRIPTS) {
        const fn = languageConsistencyRewardFunction(script);
        TEXTS.forEach((completion, i) => {
          const expected = fn.compute({ completion, prompt: '', problem: CD });
          seen.add(expected as number | null);
          expect(actual[script][i], `${script}, text ${i}: ${JSON.stringify(completion)}`).toBe(
            expected,
          );
        });
      }
      // The cases reach 0, 1, null and values strictly between.
      expect(seen.has(0) && seen.has(1) && seen.has(null)).toBe(true);
      expect([...seen].some((v) => v !== null && v > 0 && v < 1)).toBe(true);
    } finally {
      rmSync(lcDir, { recursive: true, force: true });
    }
  }, 60_000);

  it('is exported with the config’s script only when the config uses it', () => {
    expect(files.get('rewards.py')).not.toContain('language_consistency');
    const config = resolveConfig({
      steps: 1,
      perStepPrompts: 1,
      evalPrompts: 0,
      rewards: ['accuracy', 'language_consistency'],
      rewardWeights: [1, 0.5],
      languageScript: 'Cyrillic',
    });
    const task = createTask(config.task, config.taskOptions);
    const { train } = trainEvalProblems(task, config.seed, 1, 0);
    const py = exportTrl(config, { trainPrompts: train, evalPrompts: [] }).get('rewards.py')!;
    expect(py).toContain('LANGUAGE_SCRIPT = "Cyrillic"');
    expect(py).toContain('REWARD_FUNCS = [accuracy_reward, language_consistency_reward]');
    expect(() => resolveConfig({ languageScript: 'Klingon' })).toThrow(/languageScript/);
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

  it('a LoRA run exports its PEFT LoraConfig and the base dtype; a full run trains every weight', () => {
    const export_ = (input: Record<string, unknown>) => {
      const config = resolveConfig({ steps: 2, perStepPrompts: 1, evalPrompts: 0, ...input });
      const task = createTask(config.task, config.taskOptions);
      const { train } = trainEvalProblems(task, config.seed, 2, 0);
      return exportTrl(config, { trainPrompts: train, evalPrompts: [] });
    };
    const lora = export_({
      usePeft: true,
      loraR: 8,
      loraAlpha: 16,
      useRslora: true,
      dtype: 'bfloat16',
    });
    const py = lora.get('train_grpo.py')!;
    expect(py).toContain('from peft import LoraConfig\n');
    expect(py).toContain(
      'PEFT_CONFIG = LoraConfig(r=8, lora_alpha=16, lora_dropout=0, target_modules="all-linear", ' +
        'use_rslora=True, task_type="CAUSAL_LM")\n',
    );
    expect(py).toContain('        peft_config=PEFT_CONFIG,\n');
    expect(py).toContain('        model_init_kwargs={"dtype": "bfloat16"},\n');
    expect(lora.get('requirements.txt')).toContain('peft==0.21.2\n');
    const named = export_({ usePeft: true, loraTargetModules: ['q_proj', 'v_proj'] });
    expect(named.get('train_grpo.py')).toContain('target_modules=["q_proj", "v_proj"]');
    expect(named.get('train_grpo.py')).not.toContain('model_init_kwargs');
    // dtype nf4 (QLoRA): TRL's get_quantization_config as quantization_config, bitsandbytes in
    // the requirements; use_bnb_nested_quant is its double quantisation.
    for (const nested of [false, true]) {
      const qlora = export_({ usePeft: true, dtype: 'nf4', useBnbNestedQuant: nested });
      const qpy = qlora.get('train_grpo.py')!;
      expect(qpy).toContain('import torch\n');
      expect(qpy).toContain('from transformers import AutoTokenizer, BitsAndBytesConfig\n');
      expect(qpy).toContain(
        '        model_init_kwargs={"quantization_config": BitsAndBytesConfig(load_in_4bit=True, ' +
          `bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=${nested ? 'True' : 'False'}, ` +
          'bnb_4bit_compute_dtype=torch.float32)},\n',
      );
      expect(qpy).not.toContain('"dtype": "nf4"');
      expect(qlora.get('requirements.txt')).toMatch(/^bitsandbytes>=\d+\.\d+\.\d+$/m);
      if (hasPython) {
        const tmp = mkdtempSync(join(tmpdir(), 'trl-qlora-'));
        try {
          writeFileSync(join(tmp, 'train_grpo.py'), qpy);
          execFileSync(PYTHON, ['-m', 'py_compile', join(tmp, 'train_grpo.py')]);
        } finally {
          rmSync(tmp, { recursive: true, force: true });
        }
      }
    }
    expect(lora.get('requirements.txt')).not.toContain('bitsandbytes');
    expect(py).not.toContain('BitsAndBytesConfig');
    const full = export_({ dtype: 'bfloat16' });
    expect(full.get('train_grpo.py')).toContain('PEFT_CONFIG = None\n');
    expect(full.get('train_grpo.py')).not.toContain('peft import');
    expect(full.get('train_grpo.py')).not.toContain('model_init_kwargs');
    expect(full.get('requirements.txt')).not.toContain('peft');
    if (hasPython) {
      const tmp = mkdtempSync(join(tmpdir(), 'trl-lora-'));
      try {
        writeFileSync(join(tmp, 'train_grpo.py'), py);
        execFileSync(PYTHON, ['-m', 'py_compile', join(tmp, 'train_grpo.py')]);
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    }
  });

  it('exports enableThinking as chat_template_kwargs, and renders chat prompts with it', () => {
    const py = (enableThinking: boolean | null) => {
      const config = resolveConfig({
        template: 'chat',
        enableThinking,
        steps: 1,
        perStepPrompts: 1,
        evalPrompts: 0,
      });
      const p = createTask('arithmetic').generate(1, 1);
      return exportTrl(config, { trainPrompts: p, evalPrompts: [] }).get('train_grpo.py')!;
    };
    for (const on of [false, true]) {
      const text = py(on);
      const literal = `{"enable_thinking": ${on ? 'True' : 'False'}}`;
      expect(text).toContain(`        chat_template_kwargs=${literal},\n`);
      expect(text).toContain(`CHAT_TEMPLATE_KWARGS = ${literal}\n`);
    }
    const unset = py(null);
    expect(unset).toContain('        chat_template_kwargs=None,\n');
    expect(unset).toContain('CHAT_TEMPLATE_KWARGS = {}\n');
    // The prompt-length filter renders as TRL does, and the format reward gets the same renderer.
    expect(unset).toContain('add_generation_prompt=True, **CHAT_TEMPLATE_KWARGS');
    expect(unset).toContain('rewards.use_chat_template(tokenizer, CHAT_TEMPLATE_KWARGS)');
    if (hasPython) {
      const tmp = mkdtempSync(join(tmpdir(), 'trl-thinking-'));
      try {
        writeFileSync(join(tmp, 'train_grpo.py'), py(false));
        execFileSync(PYTHON, ['-m', 'py_compile', join(tmp, 'train_grpo.py')]);
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    }
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

// ---- untrusted text stays data -------------------------------------------------------------
// A custom reward's id and JS source come from the user (or from a shared config / URL). Before
// the fix a bare \r in the source ended the comment that quoted it, so the rest of that line was
// Python and `import rewards` ran it. The proof here is Python's own parser: the generated files
// have exactly the top-level statements of a harmless export, and every source and id comes
// back unchanged from the CUSTOM_JS_SOURCES string constants.

const PAYLOAD = "__import__('os').system('touch PWNED')";
const HOSTILE_SOURCES: Record<string, string> = {
  cr: `() => 0\r${PAYLOAD}\r# `,
  lf: `() => 0\n${PAYLOAD}`,
  crlf: `() => 0\r\n${PAYLOAD}\r\n`,
  ls: `() => 0\u2028${PAYLOAD}\u2029x\u0085y`,
  triple: `() => """\n${PAYLOAD}\n""" + '''\r${PAYLOAD}\r'''`,
  quotes: `"); ${PAYLOAD}; ("\\`,
  backslash: `() => '\\\\'\\\r${PAYLOAD}`,
  nul: `() => 0\x00\r${PAYLOAD}\x0b\x0c\x1b\x7f\x9f`,
  astral: `() => '🤔 \ud800 \udc00 é'\r${PAYLOAD}`,
};
const HOSTILE_IDS = [
  `x\n${PAYLOAD}`,
  `y\r${PAYLOAD}`,
  `z\u2028'''"""\\`,
  `w\x00\ud800`,
  "q')\nimport os\n#",
];

/** What `python3 -c` prints for each file: top-level statement kinds/names and the sources dict. */
const PY_AST_DUMP = [
  'import ast, json, sys',
  'def name(n):',
  '    if isinstance(n, (ast.FunctionDef, ast.ClassDef)): return n.name',
  '    if isinstance(n, ast.Assign): return ",".join(t.id for t in n.targets if isinstance(t, ast.Name))',
  '    if isinstance(n, (ast.Import, ast.ImportFrom)): return ",".join(a.name for a in n.names)',
  '    return ""',
  'def dump(path):',
  '    tree = ast.parse(open(path, encoding="utf-8").read())',
  '    stmts = [[type(n).__name__, name(n)] for n in tree.body]',
  '    sources = None',
  '    for n in tree.body:',
  '        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CUSTOM_JS_SOURCES" for t in n.targets):',
  '            sources = ast.literal_eval(n.value)',
  '    return {"stmts": stmts, "sources": sources}',
  'print(json.dumps([dump(p) for p in sys.argv[1:]]))',
].join('\n');

const hasPython = (() => {
  try {
    execFileSync(PYTHON, ['-c', 'import ast'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

/** The export of a config whose custom rewards have these ids and sources. */
function exportWith(custom: Record<string, string>, model = 'HuggingFaceTB/SmolLM2-135M') {
  const config = resolveConfig({
    steps: 1,
    perStepPrompts: 1,
    evalPrompts: 0,
    model,
    rewards: ['format', ...Object.keys(custom).map((id) => `custom:${id}`)],
    customRewards: custom,
  });
  const task = createTask(config.task, config.taskOptions);
  const { train } = trainEvalProblems(task, config.seed, 1, 0);
  return exportTrl(config, { trainPrompts: train, evalPrompts: [] });
}

/**
 * The TS check, which runs without python3: a small lexer for the Python this exporter writes
 * (comments end at \r, \n or \r\n as in Python; string literals with prefixes, triple quotes and
 * escapes). It returns the code outside comments and strings, and the strings' raw text.
 */
function lexPython(src: string): { code: string; strings: string[] } {
  let code = '';
  const strings: string[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (c === '#') {
      while (i < src.length && src[i] !== '\n' && src[i] !== '\r') i++;
      continue;
    }
    const prefix = /^(?:[rRbBuUfF]{0,2})(?="|')/.exec(src.slice(i, i + 3));
    const identBefore = i > 0 && /[A-Za-z0-9_]/.test(src[i - 1]);
    if (prefix && !identBefore) {
      const start = i;
      const raw = /r/i.test(prefix[0]);
      i += prefix[0].length;
      const q = src[i];
      const triple = src.startsWith(q.repeat(3), i);
      const close = triple ? q.repeat(3) : q;
      i += close.length;
      for (;;) {
        if (i >= src.length) throw new Error(`unterminated string at ${start}`);
        if (src[i] === '\\') {
          i += 2;
          continue;
        }
        if (!triple && (src[i] === '\n' || src[i] === '\r')) {
          throw new Error(`line break inside a string at ${i}`);
        }
        if (src.startsWith(close, i)) {
          i += close.length;
          break;
        }
        i++;
      }
      strings.push(src.slice(start, i));
      code += raw ? 'R' : 'S';
      continue;
    }
    code += c;
    i++;
  }
  // Blank and comment-only lines mean nothing to Python; a longer quoted source adds some.
  code = code
    .split(/\r\n|\r|\n/)
    .filter((line) => line.trim() !== '')
    .join('\n');
  return { code, strings };
}

/** Decodes a literal written by pyStr (the escapes it uses), refusing anything else. */
function decodePyStr(literal: string): string {
  expect(literal).toMatch(
    /^"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\\"nrt]|\\x[0-9a-f]{2}|\\u[0-9a-f]{4}|\\U[0-9a-f]{8})*"$/,
  );
  return literal
    .slice(1, -1)
    .replace(/\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8})|(.))/g, (_, x, u, U, ch) =>
      x || u
        ? String.fromCharCode(parseInt(x ?? u, 16))
        : U
          ? String.fromCodePoint(parseInt(U, 16))
          : (({ n: '\n', r: '\r', t: '\t' } as Record<string, string>)[ch] ?? ch),
    );
}

describe('TRL export of hostile custom rewards writes data, never code', () => {
  // Sources through the whole export (config ids are validated there, sources are not); ids
  // straight through the rewards.py template, which must be safe on its own whatever the config
  // layer lets through.
  const benignSources = Object.fromEntries(
    Object.keys(HOSTILE_SOURCES).map((id) => [id, '() => 0']),
  );
  const idStubs = HOSTILE_IDS.map((id, i) => ({
    id,
    pythonName: `custom_id_${i}`,
    source: `({ completion }) => 1 // id test\r${PAYLOAD}`,
  }));
  const benignIdStubs = idStubs.map((s, i) => ({ ...s, id: `id-${i}`, source: '() => 0' }));
  const idRewardsPy = (stubs: typeof idStubs) =>
    rewardsPy({ rewards: ['format', ...stubs.map((s) => `custom:${s.id}`)], custom: stubs });
  const expectedSources: Record<string, Record<string, string>> = {
    'rewards.py': HOSTILE_SOURCES,
    'rewards_ids.py': Object.fromEntries(idStubs.map((s) => [s.id, s.source])),
    'train_grpo.py': {},
  };
  const FILES = Object.keys(expectedSources);
  const model = `evil"\r${PAYLOAD}\n#\u2028`;
  let bad: Map<string, string>;
  let good: Map<string, string>;
  let tmp: string;
  beforeAll(() => {
    bad = exportWith(HOSTILE_SOURCES, model);
    bad.set('rewards_ids.py', idRewardsPy(idStubs));
    good = exportWith(benignSources);
    good.set('rewards_ids.py', idRewardsPy(benignIdStubs));
    tmp = mkdtempSync(join(tmpdir(), 'trl-hostile-'));
    for (const [name, text] of bad) writeFileSync(join(tmp, name), text);
  });
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('TS check: the .py files have the code of a harmless export; every string decodes back', () => {
    for (const file of FILES) {
      const a = lexPython(bad.get(file)!);
      const b = lexPython(good.get(file)!);
      expect(a.code, file).toBe(b.code);
      expect(bad.get(file)!).not.toMatch(/[\0\u2028\u2029]/);
    }
    for (const file of ['rewards.py', 'rewards_ids.py']) {
      const py = bad.get(file)!;
      const dict = /\nCUSTOM_JS_SOURCES = \{\n((?: {4}"[^\n]*",\n)*)\}\n/.exec(py);
      expect(dict, file).not.toBeNull();
      const entries = dict![1]
        .trimEnd()
        .split('\n')
        .map((line) => /^ {4}("(?:[^"\\]|\\.)*"): ("(?:[^"\\]|\\.)*"),$/.exec(line)!)
        .map((m) => [decodePyStr(m[1]), decodePyStr(m[2])]);
      expect(Object.fromEntries(entries), file).toEqual(expectedSources[file]);
    }
    const modelLine = /^MODEL = (.*)$/m.exec(bad.get('train_grpo.py')!)![1];
    expect(decodePyStr(modelLine)).toBe(model);
  });

  it.skipIf(!hasPython)(
    'python3 AST: the same top-level statements as a harmless export, sources round-trip as str constants',
    () => {
      const goodDir = mkdtempSync(join(tmpdir(), 'trl-benign-'));
      try {
        for (const [name, text] of good) writeFileSync(join(goodDir, name), text);
        // One interpreter for all files: python3 starts slowly on a loaded machine.
        const paths = FILES.flatMap((f) => [join(tmp, f), join(goodDir, f)]);
        const dumps = JSON.parse(
          execFileSync(PYTHON, ['-c', PY_AST_DUMP, ...paths], { encoding: 'utf8' }),
        ) as { stmts: [string, string][]; sources: Record<string, string> | null }[];
        FILES.forEach((file, i) => {
          const [a, b] = [dumps[2 * i], dumps[2 * i + 1]];
          expect(a.stmts, file).toEqual(b.stmts);
          if (file !== 'train_grpo.py') expect(a.sources, file).toEqual(expectedSources[file]);
        });
        expect(dumps[0].stmts.filter(([k]) => k === 'FunctionDef').map(([, n]) => n)).toContain(
          'custom_cr',
        );
      } finally {
        rmSync(goodDir, { recursive: true, force: true });
      }
      // And importing them runs nothing: the payload would create PWNED in the working directory.
      const out = execFileSync(
        PYTHON,
        [
          '-c',
          'import os, sys; os.chdir(sys.argv[1]); sys.path.insert(0, sys.argv[1]); import rewards, rewards_ids, ast; print(len(rewards.CUSTOM_JS_SOURCES), len(rewards_ids.CUSTOM_JS_SOURCES), os.path.exists("PWNED"))',
          tmp,
        ],
        { encoding: 'utf8' },
      );
      expect(out.trim()).toBe(`${Object.keys(HOSTILE_SOURCES).length} ${HOSTILE_IDS.length} False`);
    },
    60_000,
  );
});
