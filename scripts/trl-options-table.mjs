#!/usr/bin/env node
// Writes docs/trl-options.md: every option of trl/trl_options.json (GRPOConfig's own fields with
// their TRL defaults, the TrainingArguments TRL re-declares, and the TrainingArguments this project
// maps) with its project name, project default and status: same / differs because … / not
// supported. The option list and TRL's defaults come from the committed JSON; the project side is
// the STATUS table below, which tests/unit/trl-options-table.test.ts checks against
// src/grpo/config.ts's CONFIG_SCHEMA (names and defaults), and the test also checks that the
// committed docs/trl-options.md equals what this script generates.
//
//   node scripts/trl-options-table.mjs          write docs/trl-options.md
//   node scripts/trl-options-table.mjs --check  exit 1 when the committed file is out of date
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as prettier from 'prettier';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const OPTIONS_JSON = join(ROOT, 'trl', 'trl_options.json');
export const TABLE_MD = join(ROOT, 'docs', 'trl-options.md');

const NS = 'not supported';

/**
 * The project side of each TRL option. `project`/`default`: the config field (src/grpo/config.ts)
 * and its default as JSON; `status`: 'same', 'differs' (with `note` saying why) or 'not supported'
 * (with `note` when there is more to say; `detail`: a longer why, written out below the tables).
 * Options without an entry are not supported.
 */
export const STATUS = {
  // --- GRPOConfig: what the trainer computes ----------------------------------------------
  learning_rate: { project: 'learningRate', default: '1e-6', status: 'same' },
  num_generations: { project: 'numGenerations', default: '8', status: 'same' },
  num_generations_eval: {
    project: 'evalGenerations',
    default: '2',
    status: 'differs',
    note: 'default 2 completions per eval prompt (TRL: num_generations); the export writes the value',
  },
  max_completion_length: {
    project: 'maxCompletionLength',
    default: '256',
    status: 'differs',
    note: 'default 256 (TRL 512): browser memory',
  },
  temperature: { project: 'temperature', default: '1', status: 'same' },
  top_p: { project: 'topP', default: '1', status: 'same' },
  top_k: { project: 'topK', default: '0', status: 'same' },
  beta: { project: 'beta', default: '0', status: 'same' },
  num_iterations: {
    project: 'numIterations',
    default: '1',
    status: 'differs',
    note: 'the old log-probs are the sampler’s, not a training forward pass (docs/grpo.md §3)',
  },
  epsilon: { project: 'epsilon', default: '0.2', status: 'same' },
  epsilon_high: { project: 'epsilonHigh', default: 'null', status: 'same' },
  reward_weights: { project: 'rewardWeights', default: 'null', status: 'same' },
  scale_rewards: {
    project: 'scaleRewards',
    default: '"group"',
    status: 'same',
    note: "'group', 'batch', 'none', true (= 'group'), false (= 'none')",
  },
  loss_type: {
    project: 'lossType',
    default: '"dapo"',
    status: 'differs',
    note: "'grpo', 'bnpo', 'dr_grpo', 'dapo', 'cispo', 'sapo' (no 'vespo', 'luspo')",
  },
  mask_truncated_completions: {
    project: 'maskTruncatedCompletions',
    default: 'false',
    status: 'same',
  },
  multi_objective_aggregation: {
    project: 'multiObjectiveAggregation',
    default: '"sum_then_normalize"',
    status: 'same',
    note: "'sum_then_normalize' or 'normalize_then_sum' (GDPO, docs/grpo.md §2)",
  },
  sapo_temperature_pos: {
    project: 'sapoTemperaturePos',
    default: '1',
    status: 'same',
  },
  sapo_temperature_neg: {
    project: 'sapoTemperatureNeg',
    default: '1.05',
    status: 'same',
  },
  importance_sampling_level: {
    project: 'importanceSamplingLevel',
    default: '"token"',
    status: 'same',
    note: "'token' or 'sequence' (GSPO, docs/grpo.md §3)",
  },
  shuffle_dataset: {
    status: 'differs',
    note: 'prompts come in the seeded order of the task; the export sets False',
  },
  remove_unused_columns: {
    status: 'same',
    note: 'the rewards see the whole problem; the export keeps the columns',
  },
  generation_batch_size: { status: NS, note: 'one generation of B·G completions per step' },
  steps_per_generation: {
    status: NS,
    note: 'one generation per optimizer step at μ = 1; see below',
    detail:
      'A playground step samples B·G completions once and takes μ = numIterations optimizer steps, each over the whole batch in GA micro-batches: TRL with its default steps_per_generation = gradient_accumulation_steps, which the export keeps (it writes no steps_per_generation, and per_device_train_batch_size = B·G / (processes · GA) makes TRL generate the same B·G completions at a time). A larger value makes TRL cut one generation into steps_per_generation / GA optimizer steps on disjoint slices, taken iteration-major (for each of the μ iterations every slice in turn), the later slices trained off-policy against old log-probs scored when the batch was generated. Supporting it needs PolicyObjective.update to step through slices inside its μ loop (it runs μ passes over one batch, one optimizer step each), the learning-rate schedule and the export’s max_steps, save_steps and logging_steps to count steps × μ × slices optimizer steps (they count steps × μ), the step’s metrics to average over every slice, and the Learn view’s first-pass recomputation to follow one slice. None of that is done; numIterations > 1 is the way to take several optimizer steps per generation here.',
  },
  min_p: {
    project: 'minP',
    default: 'null',
    status: 'same',
    note: 'after top-k and top-p, as transformers applies it',
  },
  repetition_penalty: {
    project: 'repetitionPenalty',
    default: '1',
    status: 'same',
    note: 'on prompt and completion tokens, before temperature and the filters',
  },
  chat_template_kwargs: {
    project: 'enableThinking',
    default: 'null',
    status: 'differs',
    note: 'only its enable_thinking key (true/false); null exports None',
  },
  delta: {
    project: 'delta',
    default: 'null',
    status: 'same',
    note: 'two-sided clipping (docs/grpo.md §3)',
  },
  top_entropy_quantile: {
    project: 'topEntropyQuantile',
    default: '1',
    status: 'same',
    note: 'per micro-batch (docs/grpo.md §3); not combined with entropy_coef ≠ 0',
  },
  entropy_coef: {
    project: 'entropyCoef',
    default: '0',
    status: 'same',
    note: 'static coefficient (docs/grpo.md §5); use_adaptive_entropy is not supported',
  },
  use_bias_correction_kl: { status: NS, note: 'docs/grpo.md §3' },
  off_policy_mask_threshold: { status: NS, note: 'docs/grpo.md §3' },
  sync_ref_model: { status: NS, note: 'the reference is the run’s initial weights' },
  use_vllm: { status: NS, note: 'sampling runs in WebGPU with the training weights' },
  disable_dropout: { status: 'same', note: 'the model family has no dropout' },
  log_completions: {
    status: 'differs',
    note: 'every completion is kept in the step report (the Inspector)',
  },
  // --- TrainingArguments TRL re-declares (trl_base_config) ---------------------------------
  logging_steps: {
    project: 'loggingSteps',
    default: '1',
    status: 'differs',
    note: 'default 1 (TRL 10); a playground step is μ optimizer steps, exported × numIterations; every step is stored regardless',
  },
  gradient_checkpointing: {
    project: 'gradientCheckpointing',
    default: 'false',
    status: 'differs',
    note: 'default false (TRL True): the tiny models fit without it and train faster; exported as set',
  },
  bf16: { status: 'differs', note: 'training is f32 on WebGPU; the export keeps bf16' },
  // --- TrainingArguments the project maps ----------------------------------------------------
  max_steps: {
    project: 'steps',
    default: '200',
    status: 'differs',
    note: 'steps counts sampled batches; max_steps = steps × numIterations (docs/grpo.md "Steps and the schedule")',
  },
  save_steps: {
    project: 'saveSteps',
    default: '50',
    status: 'differs',
    note: 'in sampled batches; exported × numIterations',
  },
  eval_steps: {
    project: 'evalSteps',
    default: '0',
    status: 'differs',
    note: 'in sampled batches, 0 = off; exported × numIterations with eval_strategy="steps"',
  },
  seed: { project: 'seed', default: '42', status: 'same' },
  gradient_accumulation_steps: {
    project: 'gradientAccumulationSteps',
    default: '1',
    status: 'same',
  },
  lr_scheduler_type: {
    project: 'lrScheduler',
    default: '"linear"',
    status: 'differs',
    note: "only 'constant', 'linear', 'cosine'",
  },
  warmup_steps: {
    project: 'warmupSteps',
    default: '0',
    status: 'same',
    note: 'optimizer steps; warmupRatio is exported as a value < 1',
  },
  weight_decay: { project: 'weightDecay', default: '0', status: 'same' },
  adam_beta1: { project: 'adamBeta1', default: '0.9', status: 'same' },
  adam_beta2: { project: 'adamBeta2', default: '0.999', status: 'same' },
  adam_epsilon: { project: 'adamEpsilon', default: '1e-8', status: 'same' },
  max_grad_norm: { project: 'maxGradNorm', default: '1', status: 'same' },
  per_device_train_batch_size: {
    project: 'perStepPrompts',
    default: '4',
    status: 'differs',
    note: 'B prompts per step; the export derives per_device_train_batch_size = B·G / (processes · GA)',
  },
};

const esc = (s) => String(s).replace(/\|/g, '\\|');
const code = (s) => (s === undefined || s === null || s === '' ? '—' : `\`${esc(s)}\``);

/** The options whose `detail` is written out below the tables (too long for a cell). */
function detailsSection() {
  const entries = Object.entries(STATUS).filter(([, e]) => e.detail);
  if (entries.length === 0) return '';
  return `\n## Why, at more length\n\n${entries.map(([name, e]) => `- \`${name}\`: ${e.detail}`).join('\n')}\n`;
}

function statusText(entry) {
  if (!entry) return NS;
  if (entry.status === 'differs') return `differs: ${entry.note}`;
  return entry.note ? `${entry.status} (${entry.note})` : entry.status;
}

function row(name, trlDefault, entry) {
  return `| \`${name}\` | ${code(trlDefault)} | ${code(entry?.project)} | ${code(entry?.default)} | ${esc(statusText(entry))} |`;
}

const HEAD = [
  '| TRL option | TRL default | project option | project default | status |',
  '| --- | --- | --- | --- | --- |',
];

/** The Markdown of docs/trl-options.md for the parsed trl_options.json. */
export function generateTable(options) {
  const grpo = options.grpo_config.map((name) =>
    row(name, options.grpo_config_defaults?.[name], STATUS[name]),
  );
  const base = options.trl_base_config.map((name) => row(name, null, STATUS[name]));
  const mapped = options.training_arguments
    .filter((name) => STATUS[name] && !options.trl_base_config.includes(name))
    .map((name) => row(name, null, STATUS[name]));
  return `# TRL options and their status here

Generated by \`node scripts/trl-options-table.mjs\` from \`trl/trl_options.json\` (TRL ${esc(options.trl_version)}: ${esc(options.read_from ?? '')});
do not edit by hand: \`tests/unit/trl-options-table.test.ts\` checks that this file is what the script
writes and that the project names and defaults match \`src/grpo/config.ts\`.

"same": the option exists here with TRL's meaning and default. "differs": it exists with another
default or meaning (why is given). "not supported": no such option here; the TRL export leaves TRL's
default. Options of this project without a TRL counterpart are listed in docs/grpo.md "Options and
their TRL names". A playground step is one sampled batch of numIterations (μ) optimizer steps
(docs/grpo.md "Steps and the schedule").

## GRPOConfig

${[...HEAD, ...grpo].join('\n')}

## TrainingArguments that GRPOConfig re-declares

TRL's defaults for these: logging_steps 10, gradient_checkpointing True, bf16 True unless fp16.

${[...HEAD, ...base].join('\n')}

## TrainingArguments the project maps

Every other TrainingArguments option is not supported (the export leaves transformers' default).

${[...HEAD, ...mapped].join('\n')}
${detailsSection()}`;
}

/** generateTable's text as the repository's prettier formats it (what is committed). */
export async function formattedTable(options) {
  const config = (await prettier.resolveConfig(TABLE_MD)) ?? {};
  return prettier.format(generateTable(options), { ...config, filepath: TABLE_MD });
}

async function main() {
  const options = JSON.parse(readFileSync(OPTIONS_JSON, 'utf8'));
  const text = await formattedTable(options);
  if (process.argv.includes('--check')) {
    const committed = readFileSync(TABLE_MD, 'utf8');
    if (committed !== text) {
      console.error('docs/trl-options.md is out of date: run node scripts/trl-options-table.mjs');
      process.exit(1);
    }
    return;
  }
  writeFileSync(TABLE_MD, text);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
