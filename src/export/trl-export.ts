// The whole experiment as a TRL project to scale out on GPUs. exportTrl() returns the
// folder as file name → text: train_grpo.py (GRPOConfig with every option the config maps),
// rewards.py (the built-in rewards re-implemented in Python with identical semantics; custom JS
// rewards as marked stubs quoting their source, which is written only as Python string data), train.jsonl / eval.jsonl (the exact prompts and
// verifier data), accelerate configs, pinned requirements.txt, config.json and a README that lists
// every option without a TRL equivalent and what the export did with it.

import { mdCode } from './markdown';
import { type Config, ConfigError, configSchemaRows, resolveConfig } from '../grpo/config';
import { overLimitMessage, type SizeLimit } from '../core/limits';
import { CUSTOM_REWARD_PREFIX } from '../rewards/rewards';
import { formatPrompt } from '../tasks/prompt';
import type { Problem } from '../tasks/types';
import { commentText, pyStr } from './trl-templates/py-literal';
import { type CustomRewardStub, rewardsPy } from './trl-templates/rewards-py';
import {
  accelerateConfigYaml,
  accelerateZero2Yaml,
  PINNED,
  requirementsTxt,
  trainPy,
} from './trl-templates/train-py';

export interface TrlExportData {
  trainPrompts: readonly Problem[];
  evalPrompts: readonly Problem[];
}

export interface TrlExportOptions {
  /** GPUs in accelerate_config.yaml (default 8). */
  processes?: number;
}

/**
 * The training prompts one export writes to train.jsonl (steps × perStepPrompts, the run's own
 * prompts in its order). A Countdown line is about 800 characters: 100 000 prompts make an 81 MB
 * file, drawn and written in about 6 s here; ten times that passes V8's longest string (2^29
 * characters) and the page's ZIP in memory. Checked before any prompt is drawn.
 */
export const TRL_EXPORT_PROMPTS: SizeLimit = { max: 100_000, unit: 'training prompts' };

/** Refuses a run whose exported prompts (steps × perStepPrompts) pass TRL_EXPORT_PROMPTS. */
export function checkTrlExportSize(config: Pick<Config, 'steps' | 'perStepPrompts'>): void {
  const n = config.steps * config.perStepPrompts;
  if (n > TRL_EXPORT_PROMPTS.max)
    throw new ConfigError(
      'steps',
      overLimitMessage(
        `TRL export: steps × perStepPrompts = ${config.steps} × ${config.perStepPrompts} =`,
        n,
        TRL_EXPORT_PROMPTS,
      ),
    );
}

/** A Python literal for a JSON-like value. */
export function pyLiteral(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new RangeError(`cannot export non-finite number ${v}`);
    return JSON.stringify(v);
  }
  // Not JSON.stringify: its output keeps U+2028, lone surrogates and other raw characters that
  // are either invalid or unsafe in a Python source file; pyStr writes pure ASCII.
  if (typeof v === 'string') return pyStr(v);
  if (Array.isArray(v)) return `[${v.map(pyLiteral).join(', ')}]`;
  if (typeof v === 'object') {
    return `{${Object.entries(v as Record<string, unknown>)
      .map(([k, x]) => `${pyStr(k)}: ${pyLiteral(x)}`)
      .join(', ')}}`;
  }
  throw new TypeError(`cannot export ${typeof v}`);
}

/**
 * Options counted in the playground's steps (sampled batches) that TRL counts in optimizer steps:
 * each step is numIterations optimizer steps (docs/grpo.md "Steps and the schedule"), so the
 * exported run has the same schedule, saves at the same batches and logs one row per batch (TRL's
 * log row then averages the μ optimizer steps, as the playground's row does, §6).
 */
const PER_OPTIMIZER_STEP = new Set(['steps', 'saveSteps', 'loggingSteps']);

/** The chat template's keyword arguments of a run: enable_thinking when the config sets it. */
export function chatTemplateKwargs(config: Pick<Config, 'enableThinking'>): {
  enable_thinking: boolean;
} | null {
  return config.enableThinking === null ? null : { enable_thinking: config.enableThinking };
}

/** GRPOConfig keyword arguments for every config field with a TRL name, in schema order. */
export function grpoConfigArgs(config: Config): [string, string][] {
  const args: [string, string][] = [];
  for (const row of configSchemaRows()) {
    if (row.trl === null) continue;
    let value: unknown = config[row.key];
    // transformers ≥ 5 reads warmup_steps < 1 as a ratio (warmup_ratio was removed).
    if (row.key === 'warmupSteps' && config.warmupSteps === 0) value = config.warmupRatio;
    if (PER_OPTIMIZER_STEP.has(row.key)) value = (value as number) * config.numIterations;
    // TRL passes chat_template_kwargs to apply_chat_template, as the playground passes the switch.
    if (row.key === 'enableThinking') value = chatTemplateKwargs(config);
    args.push([row.trl, pyLiteral(value)]);
  }
  return args;
}

function customStubs(config: Config): CustomRewardStub[] {
  const used = new Set<string>(['format_reward', 'accuracy_reward']);
  return config.rewards
    .filter((r) => r.startsWith(CUSTOM_REWARD_PREFIX))
    .map((r) => {
      const id = r.slice(CUSTOM_REWARD_PREFIX.length);
      const base = `custom_${id.replace(/[^A-Za-z0-9_]/g, '_')}`;
      let name = base;
      for (let i = 2; used.has(name); i++) name = `${base}_${i}`;
      used.add(name);
      return { id, pythonName: name, source: config.customRewards[id] };
    });
}

function jsonl(problems: readonly Problem[], config: Config): string {
  return problems
    .map((p) => {
      const f = formatPrompt(p, config.template);
      return JSON.stringify({
        // An imported dataset row's other columns, under their names: TRL passes them to the
        // reward functions as keyword arguments, as the playground's custom rewards get them.
        // The export's own fields below win over a column of the same name.
        ...p.columns,
        prompt: f.kind === 'text' ? f.text : f.messages,
        // A JSON string, so that datasets infers one column type for every task's verifier.
        verifier: JSON.stringify(p.verifier),
        id: p.id,
        reference: p.reference,
      });
    })
    .map((line) => `${line}\n`)
    .join('');
}

function readme(
  config: Config,
  stubs: CustomRewardStub[],
  data: TrlExportData,
  processes: number,
  grpoArgs: [string, string][],
): string {
  const rows = configSchemaRows();
  const mapped = rows
    .filter((r) => r.trl !== null)
    .map((r) => {
      const arg = grpoArgs.find(([k]) => k === r.trl);
      const note =
        r.key === 'warmupSteps' && config.warmupSteps === 0 && config.warmupRatio > 0
          ? ' (from warmupRatio)'
          : '';
      const cell = (text: string) => mdCode(text, { table: true });
      return `| ${cell(r.key)} | ${cell(r.trl ?? '')} | ${cell(arg ? arg[1] : '')}${note} |`;
    });
  const unmapped = rows
    .filter((r) => r.trl === null)
    .map(
      (r) =>
        `| ${mdCode(r.key, { table: true })} | ${mdCode(JSON.stringify(config[r.key]) ?? 'undefined', { table: true })} | ${r.exportNote ?? ''} |`,
    );
  const b = config.perStepPrompts;
  const g = config.numGenerations;
  const custom = stubs.length
    ? `\n## Custom rewards: port them first\n\nThese rewards are JavaScript in the playground. rewards.py contains a stub for each that quotes the JS\nsource and raises \`NotImplementedError\`: the run stops at its first batch until you port them.\n\n${stubs.map((s) => `- ${mdCode(`custom:${commentText(s.id)}`)} → ${mdCode(s.pythonName)} in rewards.py`).join('\n')}\n`
    : '';
  return `# GRPO run exported from GRPO Playground

Model ${mdCode(config.model)}, task ${mdCode(config.task)} ${mdCode(JSON.stringify(config.taskOptions) ?? '{}')}, template ${mdCode(config.template)},
rewards ${config.rewards.map((r) => mdCode(r)).join(', ')} with weights ${mdCode(JSON.stringify(config.rewardWeights) ?? 'null')}.
${data.trainPrompts.length} training prompts (${config.steps} steps × ${b} prompts) in train.jsonl, ${data.evalPrompts.length} held-out prompts in eval.jsonl.

## Launch

\`\`\`bash
python -m venv .venv && . .venv/bin/activate
pip install -r requirements.txt            # trl ${PINNED.trl}, transformers ${PINNED.transformers}, torch ${PINNED.torch}

# 1 GPU
python train_grpo.py                        # or: accelerate launch --num_processes 1 train_grpo.py

# ${processes} GPUs on one machine (data parallel)
accelerate launch --config_file accelerate_config.yaml train_grpo.py

# ${processes} GPUs with DeepSpeed ZeRO-2 (pip install deepspeed==${PINNED.deepspeed})
accelerate launch --config_file accelerate_zero2.yaml train_grpo.py
\`\`\`

\`--model <name or path>\` overrides the model, \`--output-dir\` the output folder (default ./output).
${config.model === 'bundled' ? "\n**The model is the playground's bundled model**: pass its Hugging Face name or a local folder with\n`--model`, since 'bundled' means nothing outside the browser.\n" : ''}
Every optimizer step uses ${b} prompts × ${g} completions = ${b * g} sequences, as in the playground, on any
number of GPUs: train_grpo.py sets \`per_device_train_batch_size = ${b * g} / (processes × ${config.gradientAccumulationSteps})\`
and stops with a message when that does not divide.
${custom}
## Options mapped to TRL

| playground | GRPOConfig | value |
| --- | --- | --- |
${mapped.join('\n')}

Set by the script: \`output_dir\`, \`per_device_train_batch_size\` (above), \`shuffle_dataset=False\` (prompts
are already in the playground's seeded order), \`report_to="none"\`${data.evalPrompts.length ? ', `eval_strategy="steps"`, `eval_steps`, `per_device_eval_batch_size`' : ''}.

## Options without a TRL equivalent

| playground | value | what the export does |
| --- | --- | --- |
${unmapped.join('\n')}

## Semantics

rewards.py re-implements the playground's format and accuracy rewards exactly (same regexes, ASCII
whitespace, exact Countdown arithmetic with \`fractions.Fraction\`, no \`eval()\`), and language_consistency
with the playground's own character classes as code point tables when the run uses it; the playground's test
suite runs it against the TypeScript rewards. A reward returning \`None\` is "not applicable" in both.
TRL ${PINNED.trl} computes advantages, clipping and loss aggregation with the same option names; its metrics are
logged under the same names as the playground's (\`rewards/<function>/mean\` …). \`max_steps\`, \`save_steps\`,
\`logging_steps\` and \`eval_steps\` are the playground's steps × num_iterations: TRL counts optimizer steps, the
playground sampled batches (${config.numIterations} optimizer step${config.numIterations === 1 ? '' : 's'} each).
The option names were checked against trl_options.json (GRPOConfig fields of the TRL 1.x line).
`;
}

/** The exported folder as file name → content. */
export function exportTrl(
  config: Config,
  data: TrlExportData,
  options: TrlExportOptions = {},
): Map<string, string> {
  const c = resolveConfig(config);
  const processes = options.processes ?? 8;
  if (data.trainPrompts.length === 0) throw new RangeError('exportTrl: no training prompts');
  if (data.trainPrompts.length > TRL_EXPORT_PROMPTS.max)
    throw new RangeError(
      overLimitMessage('exportTrl: training prompts', data.trainPrompts.length, TRL_EXPORT_PROMPTS),
    );
  const stubs = customStubs(c);
  const grpoArgs = grpoConfigArgs(c);
  const files = new Map<string, string>();
  files.set(
    'train_grpo.py',
    trainPy(
      {
        model: c.model,
        grpoArgs,
        perStepPrompts: c.perStepPrompts,
        numGenerations: c.numGenerations,
        gradientAccumulationSteps: c.gradientAccumulationSteps,
        maxPromptLength: c.maxPromptLength,
        conversational: c.template === 'chat',
        chatTemplateKwargs: pyLiteral(chatTemplateKwargs(c) ?? {}),
        hasEval: data.evalPrompts.length > 0,
        evalSteps: (c.evalSteps > 0 ? c.evalSteps : c.saveSteps) * c.numIterations,
        evalGenerations: c.evalGenerations,
        peft: c.usePeft
          ? {
              r: c.loraR,
              alpha: c.loraAlpha,
              dropout: c.loraDropout,
              targetModules: c.loraTargetModules,
              useRslora: c.useRslora,
            }
          : null,
        // The playground's dtype is the frozen base's storage, so it carries over only with LoRA;
        // nf4 becomes a BitsAndBytesConfig (QLoRA), the others from_pretrained's dtype.
        modelDtype: c.usePeft && c.dtype !== 'float32' && c.dtype !== 'nf4' ? c.dtype : null,
        quantization: c.usePeft && c.dtype === 'nf4' ? { nested: c.useBnbNestedQuant } : null,
      },
      pyLiteral,
    ),
  );
  files.set(
    'rewards.py',
    rewardsPy({ rewards: c.rewards, custom: stubs, languageScript: c.languageScript }),
  );
  files.set('train.jsonl', jsonl(data.trainPrompts, c));
  if (data.evalPrompts.length > 0) files.set('eval.jsonl', jsonl(data.evalPrompts, c));
  files.set(
    'requirements.txt',
    requirementsTxt({ peft: c.usePeft, bitsandbytes: c.usePeft && c.dtype === 'nf4' }),
  );
  files.set('accelerate_config.yaml', accelerateConfigYaml(processes));
  files.set('accelerate_zero2.yaml', accelerateZero2Yaml(processes));
  files.set('config.json', `${JSON.stringify(c, null, 2)}\n`);
  files.set('README.md', readme(c, stubs, data, processes, grpoArgs));
  return files;
}
