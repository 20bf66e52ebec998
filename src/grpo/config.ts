// The one typed run configuration, shared by the CLI, the UI (shareable URL) and the TRL export.
// Field names are TRL GRPOConfig names in camelCase (numGenerations ↔ num_generations …) plus this
// project's own (model, task, rewards …). Everything — the Config type, the defaults, validation,
// CLI flags, --help, URL parameters and the TRL mapping — comes from the single CONFIG_SCHEMA table.

import { ALL_LOSS_TYPES, IMPORTANCE_SAMPLING_LEVELS } from '../core/loss-definitions';
import { checkLoraOptions, LORA_ALPHA_MAX, type LoraOptions } from '../core/lora';
import { resolveTaskOptions, TASK_NAMES } from '../tasks/index';
import { PROMPT_TEMPLATES } from '../tasks/types';
import { MULTI_OBJECTIVE_AGGREGATIONS, SCALE_REWARDS } from './advantages';
import { LANGUAGE_SCRIPTS } from '../rewards/language-consistency';
import { BUILTIN_REWARDS, CUSTOM_REWARD_PREFIX } from '../rewards/rewards';
import { rewardIdsProblem } from '../rewards/reward-id';
import { overLimitMessage, type SizeLimit } from '../core/limits';

// ---------------------------------------------------------------------------------------------
// Value types of the table. `T` is carried for the derived Config type only.
// ---------------------------------------------------------------------------------------------
interface TypeSpec<T> {
  kind: 'int' | 'number' | 'boolean' | 'string' | 'enum' | 'string[]' | 'number[]' | 'object';
  nullable?: boolean;
  min?: number;
  max?: number;
  exclusiveMin?: boolean;
  exclusiveMax?: boolean;
  /** A count that sizes work or memory: above limit.max it is refused with the limit's message
   * (src/core/limits.ts), before anything is allocated from it. On an object: how many entries. */
  limit?: SizeLimit;
  values?: readonly string[];
  /** Phantom: never set. */
  readonly _t?: T;
}

const int = (min?: number, max?: number): TypeSpec<number> => ({ kind: 'int', min, max });
const num = (min?: number, max?: number, exclusiveMin = false): TypeSpec<number> => ({
  kind: 'number',
  min,
  max,
  exclusiveMin,
});
const bool = (): TypeSpec<boolean> => ({ kind: 'boolean' });
const str = (): TypeSpec<string> => ({ kind: 'string' });
const oneOf = <const V extends string>(values: readonly V[]): TypeSpec<V> => ({
  kind: 'enum',
  values,
});
const strList = (): TypeSpec<string[]> => ({ kind: 'string[]' });
const numList = (): TypeSpec<number[]> => ({ kind: 'number[]' });
const obj = <T extends Record<string, unknown>>(): TypeSpec<T> => ({ kind: 'object' });
const nullable = <T>(t: TypeSpec<T>): TypeSpec<T | null> =>
  ({ ...t, nullable: true }) as TypeSpec<T | null>;
/** A count with a size limit (see TypeSpec.limit); on an object, the number of its entries. */
const limited = <T>(t: TypeSpec<T>, max: number, unit: string): TypeSpec<T> => ({
  ...t,
  limit: { max, unit },
});
/** Below 1: [min, 1) (AdamW's β: β = 1 divides by 1 − β^t = 0). */
const belowOne = (t: TypeSpec<number>): TypeSpec<number> => ({ ...t, max: 1, exclusiveMax: true });

/**
 * A value the schema accepts but that is outside what runs normally use: accepted with a warning
 * (configWarnings), because research does use it. Values outside the type's own range are refused.
 */
export interface SaneRange {
  min?: number;
  /** min itself is outside (maxGradNorm 0: clipping off). */
  exclusiveMin?: boolean;
  max?: number;
  /** Why a value outside is unusual, for the warning. */
  note: string;
}

export interface FieldSpec<T> {
  type: TypeSpec<T>;
  default: T;
  /** One line for --help and the UI tooltip. */
  help: string;
  /** The TRL GRPOConfig / TrainingArguments option this maps to one-to-one, or null. */
  trl: string | null;
  /** For trl = null: how the TRL export handles it instead (README lists these); with a TRL
   * name: how the exported value differs (steps → max_steps × numIterations). */
  exportNote?: string;
  /** Accepted outside this range with a warning (configWarnings). */
  sane?: SaneRange;
}

const field = <T>(
  type: TypeSpec<T>,
  def: NoInfer<T>,
  help: string,
  trl: string | null,
  exportNote?: string,
): FieldSpec<T> => ({
  type,
  default: def,
  help,
  trl,
  ...(exportNote ? { exportNote } : {}),
});
const warnOutside = <T>(f: FieldSpec<T>, sane: SaneRange): FieldSpec<T> => ({ ...f, sane });

/** The longest run: far beyond what a small model trains on one GPU in a month (at a second per
 * step, 11 days), and small enough that nothing proportional to it (the prompt stream, the
 * schedule) takes minutes or gigabytes before the first step. SFT's maxSteps shares it. */
export const MAX_STEPS = 1_000_000;
/** Longest prompt or completion, in tokens: past the context of every model this app loads. */
export const MAX_SEQUENCE_TOKENS = 131_072;

export const LR_SCHEDULERS = ['constant', 'cosine', 'linear'] as const;

/** TRL's boolean spellings of scale_rewards (also as CLI/URL text). */
const SCALE_REWARDS_BOOLEANS = new Map<unknown, string>([
  [true, 'group'],
  [false, 'none'],
  ['true', 'group'],
  ['false', 'none'],
]);

/** The schema: order here is the order of --help and of the UI form. */
export const CONFIG_SCHEMA = {
  // --- what to train, on what -------------------------------------------------------------
  model: field(
    str(),
    'bundled',
    "a local Hugging Face model folder (config.json, *.safetensors, tokenizer.json); 'bundled' = the model in public/models/",
    null,
    'becomes MODEL in train_grpo.py (override with --model); the bundled model needs a Hub name or a path on the cluster',
  ),
  task: field(
    oneOf(TASK_NAMES),
    'countdown',
    `prompt source: ${TASK_NAMES.join(', ')}`,
    null,
    'the prompts are written to train.jsonl / eval.jsonl; the verifier is re-implemented in rewards.py',
  ),
  taskOptions: field(
    obj<Record<string, number | string>>(),
    {},
    'task knobs as JSON, e.g. {"numbers":4} (defaults filled in)',
    null,
    'baked into the exported prompts and their verifier fields',
  ),
  template: field(
    oneOf(PROMPT_TEMPLATES),
    'r1-zero',
    "prompt format: 'r1-zero' (base models, docs/grpo.md §8) or 'chat' (instruct models)",
    null,
    "'r1-zero' exports text prompts, 'chat' conversational prompts (TRL applies the tokenizer's chat template)",
  ),
  enableThinking: field(
    nullable(bool()),
    null,
    "the chat template's thinking switch (template 'chat'), passed as enable_thinking: false ends Qwen3's prompt in an empty <think></think>; null = the template's default (Qwen3: on), as in transformers",
    // Exported as chat_template_kwargs={"enable_thinking": …} (None when null): grpoConfigArgs.
    'chat_template_kwargs',
  ),
  rewards: field(
    strList(),
    ['format', 'accuracy'],
    `reward functions in order: ${BUILTIN_REWARDS.join(', ')}, custom:<id>`,
    null,
    'the reward_funcs list passed to GRPOTrainer (rewards.py)',
  ),
  customRewards: field(
    // Each custom reward runs in a sandbox of its own (a worker thread with its own heap).
    limited(obj<Record<string, string>>(), 16, 'custom rewards'),
    {},
    'custom JS rewards by id: {"<id>": "<source>"}',
    null,
    'exported as Python stubs in rewards.py that quote the JS source and raise until ported',
  ),
  rewardWeights: field(
    nullable(numList()),
    null,
    'weight of each reward function (null = all 1)',
    'reward_weights',
  ),
  languageScript: field(
    oneOf(LANGUAGE_SCRIPTS),
    'Latin',
    `target script of the language_consistency reward (DeepSeek-R1 §2.3.3: the share of the chain of thought's words in it): ${LANGUAGE_SCRIPTS.join(', ')}`,
    null,
    "baked into rewards.py's language_consistency_reward (with the script's character ranges)",
  ),
  evalPrompts: field(
    // Drawing 10 000 held-out Countdown prompts takes half a second; evaluating them, far longer.
    limited(int(0), 10_000, 'prompts'),
    32,
    'held-out prompts for evaluation (0 = none)',
    null,
    'written to eval.jsonl and passed as eval_dataset',
  ),
  // --- sampling ---------------------------------------------------------------------------
  numGenerations: field(
    limited(int(2), 1024, 'completions per prompt'),
    8,
    'G: completions sampled per prompt (the group)',
    'num_generations',
  ),
  perStepPrompts: field(
    limited(int(1), 4096, 'prompts per step'),
    4,
    'B: prompts per optimizer step (N = B·G sequences)',
    null,
    'per_device_train_batch_size = B·G / (processes · gradientAccumulationSteps), computed in train_grpo.py',
  ),
  maxPromptLength: field(
    limited(int(1), MAX_SEQUENCE_TOKENS, 'tokens'),
    256,
    'prompts longer than this many tokens are dropped',
    null,
    'TRL ≥ 0.28 has no max_prompt_length: train_grpo.py filters longer prompts out of the dataset',
  ),
  maxCompletionLength: field(
    limited(int(1), MAX_SEQUENCE_TOKENS, 'tokens'),
    256,
    'completion tokens sampled at most',
    'max_completion_length',
  ),
  temperature: warnOutside(
    field(num(0, undefined, true), 1.0, 'sampling temperature', 'temperature'),
    { max: 2, note: 'sampling is close to uniform over the vocabulary' },
  ),
  topP: field(num(0, 1, true), 1.0, 'nucleus sampling mass (1 = off)', 'top_p'),
  minP: field(
    nullable(num(0, 1)),
    null,
    'min-p sampling: keep tokens with probability ≥ minP · the most likely one (null = off)',
    'min_p',
  ),
  repetitionPenalty: field(
    num(0, undefined, true),
    1.0,
    'repetition penalty: logits of tokens already in the prompt or completion are divided by it (multiplied when negative) before sampling (1 = off)',
    'repetition_penalty',
  ),
  topK: field(int(0), 0, 'top-k sampling (0 = off)', 'top_k'),
  // --- optimizer --------------------------------------------------------------------------
  learningRate: warnOutside(
    field(
      // AdamW moves every weight by about the learning rate each step: above 1, by more than
      // the weights' own size, which no run recovers from.
      num(0, 1, true),
      1e-6,
      'AdamW learning rate, < 1 (TRL default 1e-6)',
      'learning_rate',
    ),
    { max: 1e-2, note: 'far above GRPO (1e-6) and LoRA (1e-4) rates; runs diverge' },
  ),
  lrScheduler: field(
    oneOf(LR_SCHEDULERS),
    'linear',
    'learning-rate schedule after warmup',
    'lr_scheduler_type',
  ),
  warmupSteps: field(
    int(0),
    0,
    'linear warmup in optimizer steps (wins over warmupRatio when > 0)',
    'warmup_steps',
  ),
  warmupRatio: field(
    belowOne(num(0)),
    0,
    'warmup as a fraction of the optimizer steps (steps × numIterations), in [0, 1)',
    null,
    'exported as warmup_steps=<ratio> (transformers ≥ 5 reads a value < 1 as a ratio; warmup_ratio was removed)',
  ),
  weightDecay: field(num(0), 0.0, 'AdamW decoupled weight decay', 'weight_decay'),
  adamBeta1: field(belowOne(num(0)), 0.9, 'AdamW β1, in [0, 1)', 'adam_beta1'),
  adamBeta2: field(belowOne(num(0)), 0.999, 'AdamW β2, in [0, 1)', 'adam_beta2'),
  adamEpsilon: field(num(0, undefined, true), 1e-8, 'AdamW ε', 'adam_epsilon'),
  maxGradNorm: warnOutside(
    field(num(0), 1.0, 'global gradient-norm clip (0 = off)', 'max_grad_norm'),
    {
      min: 0,
      exclusiveMin: true,
      note: 'gradient clipping is off: one large gradient moves the weights unbounded',
    },
  ),
  gradientAccumulationSteps: field(
    int(1),
    1,
    'micro-batches per optimizer step (must divide B·G)',
    'gradient_accumulation_steps',
  ),
  gradientCheckpointing: field(
    bool(),
    false,
    "activation checkpointing: keep each layer's input only and recompute the layer in backward (same gradients, less memory, ~1/3 more compute)",
    'gradient_checkpointing',
  ),
  logitsMemoryMiB: field(
    limited(num(0, undefined, true), 65_536, 'MiB'),
    256,
    "MiB the LM head's logits and their gradient may take at once: training makes the logits of that many completion tokens at a time (same results, less memory for large vocabularies)",
    null,
    'project-only: TRL computes the logits of a whole micro-batch at once',
  ),
  // --- GRPO objective ---------------------------------------------------------------------
  beta: field(num(0), 0.0, 'KL coefficient β (0 = no reference model; R1 used 0.001)', 'beta'),
  epsilon: warnOutside(
    // 1 − ε ≤ 0 already removes the lower clip: a larger ε means nothing more.
    field(num(0, 1), 0.2, 'clip range ε (lower), in [0, 1]', 'epsilon'),
    { max: 0.5, note: 'the papers clip at 0.2 (DAPO: 0.2 below, 0.28 above)' },
  ),
  epsilonHigh: field(
    nullable(num(0)),
    null,
    'upper clip range ε_high (null = epsilon; DAPO uses 0.28)',
    'epsilon_high',
  ),
  numIterations: field(
    limited(int(1), 1024, 'passes per step'),
    1,
    'μ: optimizer passes per sampled batch',
    'num_iterations',
  ),
  lossType: field(
    oneOf(ALL_LOSS_TYPES),
    'dapo',
    "loss aggregation (docs/grpo.md §4), or TRL's 'cispo' / 'sapo' objectives (§3)",
    'loss_type',
  ),
  sapoTemperaturePos: field(
    num(0, undefined, true),
    1.0,
    "lossType 'sapo': gate temperature τ for tokens with A > 0 (docs/grpo.md §3)",
    'sapo_temperature_pos',
  ),
  sapoTemperatureNeg: field(
    num(0, undefined, true),
    1.05,
    "lossType 'sapo': gate temperature τ for tokens with A ≤ 0 (docs/grpo.md §3)",
    'sapo_temperature_neg',
  ),
  importanceSamplingLevel: field(
    oneOf(IMPORTANCE_SAMPLING_LEVELS),
    'token',
    "'token' ratios, or 'sequence' (GSPO): one ratio per completion, exp of its mean log-ratio (docs/grpo.md §3)",
    'importance_sampling_level',
  ),
  delta: field(
    nullable(num(0, undefined, true)),
    null,
    'two-sided clipping (INTELLECT-2): cap the unclipped ratio at δ, best > 1 + epsilonHigh (null = off)',
    'delta',
  ),
  topEntropyQuantile: field(
    num(0, 1),
    1.0,
    'train the policy term only on the top ρ of tokens by entropy (per micro-batch; 1 = all; the paper uses 0.2)',
    'top_entropy_quantile',
  ),
  entropyCoef: field(
    num(),
    0.0,
    'entropy bonus: loss − entropyCoef · mean token entropy, > 0 encourages exploration (0 = off; docs/grpo.md §5)',
    'entropy_coef',
  ),
  scaleRewards: field(
    oneOf(SCALE_REWARDS),
    'group',
    "advantage scaling: 'group', 'batch' or 'none' (Dr. GRPO); true/false as in TRL mean 'group'/'none'",
    'scale_rewards',
  ),
  multiObjectiveAggregation: field(
    oneOf(MULTI_OBJECTIVE_AGGREGATIONS),
    'sum_then_normalize',
    "with several rewards: 'sum_then_normalize' (weighted sum, then §2) or 'normalize_then_sum' (GDPO: each reward normalised per group, summed, then over the batch; docs/grpo.md §2)",
    'multi_objective_aggregation',
  ),
  maskTruncatedCompletions: field(
    bool(),
    false,
    'drop completions that hit maxCompletionLength from the loss',
    'mask_truncated_completions',
  ),
  // --- LoRA (PEFT) ------------------------------------------------------------------------
  // TRL ModelConfig / PEFT LoraConfig options, not GRPOConfig ones: the flags take their TRL
  // spellings (--use_peft, --lora_r …); the TRL export passes them to GRPOTrainer as a PEFT
  // LoraConfig (peft_config), not to GRPOConfig.
  usePeft: field(
    bool(),
    false,
    'train LoRA adapters only (base frozen); the reference policy is the base model with them off',
    null,
    'TRL ModelConfig use_peft: exported as peft_config=LoraConfig(…) in train_grpo.py (off: every weight trains)',
  ),
  loraR: field(
    int(1, 1024),
    16,
    'LoRA rank r',
    null,
    'TRL ModelConfig lora_r: LoraConfig r in train_grpo.py',
  ),
  loraAlpha: field(
    // The same bound an imported adapter_config.json's lora_alpha is held to.
    num(0, LORA_ALPHA_MAX, true),
    32,
    'LoRA α: the adapter is scaled by α / r (α / √r with useRslora)',
    null,
    'TRL ModelConfig lora_alpha: LoraConfig lora_alpha in train_grpo.py',
  ),
  loraDropout: field(
    num(0, 1),
    0,
    'dropout on the adapter input; only 0 is supported (a non-zero value is rejected)',
    null,
    'TRL ModelConfig lora_dropout: LoraConfig lora_dropout in train_grpo.py',
  ),
  loraTargetModules: field(
    strList(),
    ['all-linear'],
    "projections that get adapters: 'all-linear' (every decoder projection, not lm_head) or q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj",
    null,
    'TRL ModelConfig lora_target_modules: LoraConfig target_modules in train_grpo.py',
  ),
  useRslora: field(
    bool(),
    false,
    'rank-stabilised LoRA: scale by α / √r instead of α / r',
    null,
    'TRL ModelConfig use_rslora: LoraConfig use_rslora in train_grpo.py',
  ),
  dtype: field(
    oneOf(['auto', 'bfloat16', 'float16', 'float32', 'nf4'] as const),
    'float32',
    "storage of frozen weights (the base under usePeft), widened to f32 in the kernels: bfloat16 / float16 halve their bytes, 'auto' keeps the checkpoint's 16-bit or NF4 format when every frozen matrix holds it exactly; 'nf4' (QLoRA, usePeft only) quantises each decoder projection to 4-bit NF4 in blocks of 64 with an f32 scale each, embeddings stay bfloat16; a full fine-tune trains every weight, so all stay float32",
    null,
    'TRL ModelConfig dtype: with usePeft, model_init_kwargs={"dtype": …} in train_grpo.py; nf4: TRL load_in_4bit with bnb_4bit_quant_type="nf4", exported as model_init_kwargs={"quantization_config": BitsAndBytesConfig(…)}; a full fine-tune trains in float32',
  ),
  useBnbNestedQuant: field(
    bool(),
    false,
    "with dtype 'nf4': nested (double) quantisation of the block scales, as bitsandbytes' compress_statistics: the weights take the values the double-quantised model computes with (the scales are kept expanded to f32 here)",
    null,
    'TRL ModelConfig use_bnb_nested_quant: BitsAndBytesConfig bnb_4bit_use_double_quant in train_grpo.py',
  ),
  // --- run --------------------------------------------------------------------------------
  // A step is one sampled batch (generation round) with its μ optimizer steps; the learning-rate
  // schedule and TRL's max_steps count optimizer steps, steps·μ (docs/grpo.md "Steps and the
  // schedule"). --max_steps sets this field as it is (one-to-one when μ = 1).
  steps: field(
    limited(int(1), MAX_STEPS, 'steps'),
    200,
    'sampled batches (each: numIterations optimizer steps)',
    'max_steps',
    'exported as max_steps = steps × numIterations (TRL counts optimizer steps)',
  ),
  saveSteps: field(int(1), 50, 'checkpoint every this many steps', 'save_steps'),
  loggingSteps: field(int(1), 1, 'log metrics every this many steps', 'logging_steps'),
  evalSteps: field(
    int(0),
    0,
    'evaluate on the eval prompts every this many steps and after the last (0 = off)',
    null,
    'exported as eval_strategy="steps", eval_steps (saveSteps when 0)',
  ),
  evalGenerations: field(
    limited(int(1), 1024, 'completions per prompt'),
    2,
    'completions sampled per eval prompt in those evaluations (their eval accuracy)',
    'num_generations_eval',
  ),
  loadBestModelAtEnd: field(
    bool(),
    false,
    'after the last step, load the weights of the evaluation with the best eval accuracy',
    null,
    "not exported: TRL's load_best_model_at_end chooses among saved checkpoints by an eval metric (eval_loss unless metric_for_best_model is set), not by sampled accuracy",
  ),
  seed: field(int(0), 42, 'seed of prompts, sampling and initialisation', 'seed'),
  rewardTimeoutMs: field(
    // At most a minute per call: a longer limit lets one reward stall a step indefinitely.
    int(1, 60_000),
    1000,
    'time limit of one custom reward call, in ms',
    null,
    'no TRL equivalent: Python rewards run in-process without a time limit',
  ),
} as const;

type Schema = typeof CONFIG_SCHEMA;
export type ConfigKey = keyof Schema;
type ValueOf<F> = F extends FieldSpec<infer T> ? T : never;

/** Config as written by a user (epsilonHigh and rewardWeights may be null). */
export type ConfigInput = { -readonly [K in ConfigKey]: ValueOf<Schema[K]> };

/** A resolved config: every field present and checked, epsilonHigh and rewardWeights explicit. */
export type Config = Omit<ConfigInput, 'epsilonHigh' | 'rewardWeights'> & {
  epsilonHigh: number;
  rewardWeights: number[];
};

export const CONFIG_KEYS = Object.keys(CONFIG_SCHEMA) as ConfigKey[];

/**
 * The options a run takes in the middle, from its next step (Run.applyLiveOptions), with no
 * rebuild: each is read afresh every step (sampling, rewards, the loss, the learning-rate schedule,
 * the save / eval policy), so the run goes on exactly as a run built with the new config and
 * restored at this step would. `beta` only while the run has its reference policy (built with
 * β > 0): going 0 → > 0 needs the reference weights, so a Reset. Everything else (model, task,
 * batch shape, lengths, LoRA, the optimizer's own settings, seed…) shapes buffers or the data
 * stream when the run is built and waits for a Reset. The one list: the Step button's pending
 * split (src/app/lib/pending.ts) reads it too.
 */
export const LIVE_OPTION_KEYS = [
  'rewards',
  'customRewards',
  'rewardWeights',
  'rewardTimeoutMs',
  'temperature',
  'topP',
  'minP',
  'topK',
  'repetitionPenalty',
  'learningRate',
  'beta',
  'epsilon',
  'epsilonHigh',
  'steps',
  'saveSteps',
  'loggingSteps',
  'evalSteps',
] as const satisfies readonly ConfigKey[];

/** One option changed in the middle of a run: from step `step` on (the first step trained with
 * `to`), `key` went from `from` to `to`. The run's history of these travels with its checkpoints. */
export interface LiveChange {
  step: number;
  key: ConfigKey;
  from: unknown;
  to: unknown;
}

/** The keys whose values differ between two configs (in schema order). */
export function changedKeys(a: Config, b: Config): ConfigKey[] {
  return CONFIG_KEYS.filter((key) => JSON.stringify(a[key]) !== JSON.stringify(b[key]));
}

function spec(key: ConfigKey): FieldSpec<unknown> {
  return CONFIG_SCHEMA[key] as FieldSpec<unknown>;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
  constructor(
    readonly key: string,
    message: string,
  ) {
    super(message);
  }
}

// ---------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------
function describeType(t: TypeSpec<unknown>): string {
  const base =
    t.kind === 'int'
      ? 'an integer'
      : t.kind === 'number'
        ? 'a number'
        : t.kind === 'boolean'
          ? 'true or false'
          : t.kind === 'string'
            ? 'a string'
            : t.kind === 'enum'
              ? `one of ${t.values?.map((v) => `'${v}'`).join(', ')}`
              : t.kind === 'string[]'
                ? 'an array of strings'
                : t.kind === 'number[]'
                  ? 'an array of numbers'
                  : 'an object';
  return t.nullable ? `${base} or null` : base;
}

/** `label` names the value in every refusal: the flag as typed on a command line (`--epsilon`),
 * else `config '<key>'` (a config file, a URL, the page's form, a recipe's options). */
function checkValue(
  key: string,
  t: TypeSpec<unknown>,
  v: unknown,
  label = `config '${key}'`,
): void {
  const fail = (what = describeType(t)) =>
    new ConfigError(key, `${label} must be ${what}, got ${JSON.stringify(v)}`);
  if (v === null) {
    if (t.nullable) return;
    throw fail();
  }
  switch (t.kind) {
    case 'int':
    case 'number': {
      if (typeof v !== 'number' || !Number.isFinite(v)) throw fail();
      if (t.kind === 'int' && !Number.isInteger(v)) throw fail();
      if (t.min !== undefined && (t.exclusiveMin ? v <= t.min : v < t.min))
        throw fail(`${t.exclusiveMin ? '>' : '≥'} ${t.min}`);
      if (t.max !== undefined && (t.exclusiveMax ? v >= t.max : v > t.max))
        throw fail(`${t.exclusiveMax ? '<' : '≤'} ${t.max}`);
      if (t.limit !== undefined && v > t.limit.max)
        throw new ConfigError(key, overLimitMessage(label, v, t.limit));
      return;
    }
    case 'boolean':
      if (typeof v !== 'boolean') throw fail();
      return;
    case 'string':
      if (typeof v !== 'string') throw fail();
      return;
    case 'enum':
      if (typeof v !== 'string' || !t.values?.includes(v)) throw fail();
      return;
    case 'string[]':
      if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw fail();
      return;
    case 'number[]':
      if (!Array.isArray(v) || !v.every((x) => typeof x === 'number' && Number.isFinite(x)))
        throw fail();
      return;
    case 'object': {
      if (typeof v !== 'object' || Array.isArray(v)) throw fail();
      // An object's limit bounds how many entries it has (customRewards).
      const n = Object.keys(v).length;
      if (t.limit !== undefined && n > t.limit.max)
        throw new ConfigError(key, overLimitMessage(`${label} count`, n, t.limit));
      return;
    }
  }
}

/** Why dtype 'nf4' without usePeft is refused (resolveConfig's message; the page shows it too). */
export const NF4_NEEDS_PEFT =
  "config 'dtype' nf4 needs usePeft (LoRA): a 4-bit base cannot be fully fine-tuned; turn LoRA on or pick another dtype";

/** The LoRA settings of a config (checked: unknown target modules throw), or null without usePeft. */
export function loraOptionsOf(
  c: Pick<
    Config,
    'usePeft' | 'loraR' | 'loraAlpha' | 'loraDropout' | 'loraTargetModules' | 'useRslora'
  >,
): LoraOptions | null {
  if (!c.usePeft) return null;
  const options: LoraOptions = {
    r: c.loraR,
    alpha: c.loraAlpha,
    targetModules: c.loraTargetModules,
    useRslora: c.useRslora,
    dropout: c.loraDropout,
  };
  checkLoraOptions(options);
  return options;
}

function closest(key: string): string | null {
  const norm = (s: string) => s.replace(/[-_]/g, '').toLowerCase();
  const hit = CONFIG_KEYS.find(
    (k) => norm(k) === norm(key) || (spec(k).trl && norm(spec(k).trl as string) === norm(key)),
  );
  return hit ?? null;
}

function clone<T>(v: T): T {
  return v === null || typeof v !== 'object' ? v : (JSON.parse(JSON.stringify(v)) as T);
}

/**
 * What a form edits (the playground's options): every field present, defaults filled in and checked
 * like resolveConfig's, but with the user's nulls kept: `epsilonHigh: null` keeps following
 * `epsilon` and `rewardWeights: null` keeps meaning "1 each" while other fields change. A form may
 * leave a value out of range while it is being typed; resolveConfig(draft) is the check.
 */
export type DraftConfig = Omit<Config, 'epsilonHigh' | 'rewardWeights'> & {
  /** null: follows epsilon (TRL's epsilon_high=None), whatever ε the form sets later. */
  epsilonHigh: number | null;
  /** null: 1 for each reward, however many the form lists. */
  rewardWeights: number[] | null;
};

/**
 * Defaults + the given fields, checked. Unknown keys and wrong types throw a ConfigError naming the
 * key; cross-field rules (reward names, weights length, batch divisibility, task options) too.
 */
export function resolveConfig(partial: unknown = {}): Config {
  const c = checkConfig(partial);
  return {
    ...c,
    epsilonHigh: c.epsilonHigh ?? c.epsilon,
    rewardWeights: c.rewardWeights ?? c.rewards.map(() => 1),
  };
}

/** Defaults + the given fields, checked as resolveConfig does, with epsilonHigh and rewardWeights
 * left null when they are not given: the draft a form starts from. */
export function resolveDraft(partial: unknown = {}): DraftConfig {
  return checkConfig(partial);
}

/**
 * A resolved config back as a draft: ε_high equal to ε and weights all 1 become null again (as in
 * configToUrlParams), so that the form's ε moves ε_high with it, as it would have in the config
 * that produced this one.
 */
export function draftFromConfig(config: Config): DraftConfig {
  const draft: DraftConfig = clone(config);
  if (config.epsilonHigh === config.epsilon) draft.epsilonHigh = null;
  if (config.rewardWeights.every((w) => w === 1)) draft.rewardWeights = null;
  return draft;
}

function checkConfig(partial: unknown): ConfigInput {
  if (partial === null || typeof partial !== 'object' || Array.isArray(partial)) {
    throw new ConfigError('', `config must be a JSON object, got ${JSON.stringify(partial)}`);
  }
  const given = partial as Record<string, unknown>;
  for (const key of Object.keys(given)) {
    if (!Object.prototype.hasOwnProperty.call(CONFIG_SCHEMA, key)) {
      const guess = closest(key);
      throw new ConfigError(
        key,
        `unknown config key '${key}'${guess ? ` (did you mean '${guess}'?)` : ''}`,
      );
    }
  }
  const out: Record<string, unknown> = {};
  for (const key of CONFIG_KEYS) {
    let v = given[key] === undefined ? clone(spec(key).default) : given[key];
    // TRL's GRPOConfig maps scale_rewards True → "group" and False → "none".
    if (key === 'scaleRewards') v = SCALE_REWARDS_BOOLEANS.get(v as never) ?? v;
    checkValue(key, spec(key).type, v);
    out[key] = clone(v);
  }
  const c = out as ConfigInput;

  try {
    c.taskOptions = resolveTaskOptions(c.task, c.taskOptions);
  } catch (e) {
    throw new ConfigError('taskOptions', (e as Error).message);
  }
  // One rule for reward ids (reward-id.ts), before any id is used as a name.
  const idProblem = rewardIdsProblem(c);
  if (idProblem) throw new ConfigError(idProblem.key, idProblem.message);
  for (const [id, source] of Object.entries(c.customRewards)) {
    if (typeof source !== 'string')
      throw new ConfigError('customRewards', `customRewards.${id} must be a JS source string`);
  }
  if (c.rewards.length === 0)
    throw new ConfigError('rewards', "config 'rewards' must name at least one reward function");
  if (new Set(c.rewards).size !== c.rewards.length)
    throw new ConfigError('rewards', `config 'rewards' has duplicates: ${c.rewards.join(', ')}`);
  for (const name of c.rewards) {
    if ((BUILTIN_REWARDS as readonly string[]).includes(name)) continue;
    if (
      name.startsWith(CUSTOM_REWARD_PREFIX) &&
      Object.prototype.hasOwnProperty.call(c.customRewards, name.slice(CUSTOM_REWARD_PREFIX.length))
    )
      continue;
    throw new ConfigError(
      'rewards',
      `config 'rewards': unknown reward '${name}' (built-in: ${BUILTIN_REWARDS.join(', ')}; custom:<id> needs customRewards.<id>)`,
    );
  }
  if (c.rewardWeights !== null && c.rewardWeights.length !== c.rewards.length) {
    throw new ConfigError(
      'rewardWeights',
      `config 'rewardWeights' has ${c.rewardWeights.length} entries for ${c.rewards.length} rewards (${c.rewards.join(', ')})`,
    );
  }
  if (c.loraDropout !== 0) {
    throw new ConfigError(
      'loraDropout',
      `config 'loraDropout' (lora_dropout) ${c.loraDropout} is not supported: only 0 (LoRA without dropout)`,
    );
  }
  if (c.usePeft) {
    try {
      loraOptionsOf(c as Config);
    } catch (e) {
      throw new ConfigError('loraTargetModules', (e as Error).message);
    }
  }
  // A 4-bit base cannot be trained itself (PEFT/transformers refuse to fine-tune a quantised model
  // without adapters): NF4 stores the frozen base only.
  if (c.dtype === 'nf4' && !c.usePeft) {
    throw new ConfigError('dtype', NF4_NEEDS_PEFT);
  }
  if (c.loadBestModelAtEnd && (c.evalSteps === 0 || c.evalPrompts === 0)) {
    throw new ConfigError(
      'loadBestModelAtEnd',
      `config 'loadBestModelAtEnd' needs periodic evaluation: set evalSteps > 0 and evalPrompts > 0 (got evalSteps = ${c.evalSteps}, evalPrompts = ${c.evalPrompts})`,
    );
  }
  // TRL applies the bonus on the high-entropy tokens only, normalised by their count: a
  // combination the GPU path does not compute (docs/grpo.md §5), so it is refused, not approximated.
  if (c.entropyCoef !== 0 && c.topEntropyQuantile < 1) {
    throw new ConfigError(
      'entropyCoef',
      `config 'entropyCoef' (${c.entropyCoef}) with topEntropyQuantile < 1 (${c.topEntropyQuantile}) is not supported`,
    );
  }
  const n = c.perStepPrompts * c.numGenerations;
  if (n % c.gradientAccumulationSteps !== 0) {
    throw new ConfigError(
      'gradientAccumulationSteps',
      `config 'gradientAccumulationSteps' (${c.gradientAccumulationSteps}) must divide perStepPrompts·numGenerations = ${n}`,
    );
  }
  return c;
}

export function defaultConfig(): Config {
  return resolveConfig({});
}

/** A SaneRange as text: "> 0", "≤ 0.01", "in [0, 2]". */
function saneText(r: SaneRange): string {
  const low = r.min === undefined ? null : `${r.exclusiveMin ? '>' : '≥'} ${r.min}`;
  const high = r.max === undefined ? null : `≤ ${r.max}`;
  return low && high ? `${low} and ${high}` : (low ?? high ?? '');
}

/**
 * The values of a checked config that lie outside their option's usual range (the schema's `sane`
 * declarations): accepted, because research runs use them, but never silently. The command line
 * prints each as a warning; `label` names the option as its front end spells it.
 */
export function configWarnings(
  config: Partial<ConfigInput>,
  label: (key: ConfigKey) => string = (key) => key,
): string[] {
  return Object.values(configWarningsByKey(config, label));
}

/** configWarnings by option, in schema order: what the page shows beside each field. A value
 * that is not a number (a field being typed, an emptied one) has no warning. */
export function configWarningsByKey(
  config: Partial<ConfigInput>,
  label: (key: ConfigKey) => string = (key) => key,
): Partial<Record<ConfigKey, string>> {
  const out: Partial<Record<ConfigKey, string>> = {};
  for (const key of CONFIG_KEYS) {
    const r = spec(key).sane;
    const v = config[key];
    if (!r || typeof v !== 'number' || !Number.isFinite(v)) continue;
    const low = r.min !== undefined && (r.exclusiveMin ? v <= r.min : v < r.min);
    const high = r.max !== undefined && v > r.max;
    if (low || high)
      out[key] = `${label(key)} ${v} is outside the usual range (${saneText(r)}): ${r.note}`;
  }
  return out;
}

/** Every option whose value sizes work or memory, with its limit (the Limits table of docs/guide/security.md). */
export function configSizeLimits(): { key: ConfigKey; limit: SizeLimit }[] {
  return CONFIG_KEYS.flatMap((key) => {
    const limit = spec(key).type.limit;
    return limit ? [{ key, limit }] : [];
  });
}

/** The option's command-line flag, as --help lists it. */
export const flagName = (key: ConfigKey) => `--${kebab(key)}`;

// ---------------------------------------------------------------------------------------------
// Text values (CLI flags, URL parameters)
// ---------------------------------------------------------------------------------------------
const kebab = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const snake = (k: string) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Flag spellings → key: --kebab-case, --snake_case, and the TRL name (kebab or snake) where it differs. */
const FLAG_NAMES: Map<string, ConfigKey> = (() => {
  const m = new Map<string, ConfigKey>();
  for (const key of CONFIG_KEYS) {
    const trl = spec(key).trl;
    for (const name of [kebab(key), snake(key), ...(trl ? [trl, trl.replace(/_/g, '-')] : [])]) {
      if (!m.has(name)) m.set(name, key);
    }
  }
  return m;
})();

/** `label` as in checkValue: the flag as typed, or the key quoted (a URL parameter). */
function parseText(key: ConfigKey, raw: string, label = `'${key}'`): unknown {
  const t = spec(key).type;
  const fail = () =>
    new ConfigError(key, `${label} must be ${describeType(t)}, got ${JSON.stringify(raw)}`);
  if (t.nullable && (raw === 'null' || raw === 'none')) return null;
  const json = (): unknown => {
    try {
      return JSON.parse(raw);
    } catch {
      throw fail();
    }
  };
  switch (t.kind) {
    case 'int':
      if (!/^[+-]?[0-9]+$/.test(raw)) throw fail();
      return Number(raw);
    case 'number':
      if (!/^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/.test(raw)) throw fail();
      return Number(raw);
    case 'boolean':
      if (['true', '1', 'yes'].includes(raw)) return true;
      if (['false', '0', 'no'].includes(raw)) return false;
      throw fail();
    case 'string':
    case 'enum':
      return raw;
    case 'string[]':
      if (raw.trimStart().startsWith('[')) return json();
      return raw === '' ? [] : raw.split(',').map((s) => s.trim());
    case 'number[]': {
      if (raw.trimStart().startsWith('[')) return json();
      const parts = raw === '' ? [] : raw.split(',').map((s) => s.trim());
      return parts.map((p) => {
        if (!/^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/.test(p)) throw fail();
        return Number(p);
      });
    }
    case 'object':
      return json();
  }
}

export function isHelpRequested(argv: readonly string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}

/**
 * `--num-generations 8`, `--num-generations=8`, `--num_generations 8`, `--max_steps 100` (TRL name),
 * booleans as `--flag`, `--flag=false` or `--no-flag`; lists comma-separated or JSON; objects JSON;
 * nullable fields accept `null`. --help / -h are skipped (see isHelpRequested). Values are type-checked
 * here; cross-field rules run in resolveConfig.
 */
export function parseCliArgs(argv: readonly string[]): Partial<ConfigInput> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') continue;
    if (!arg.startsWith('--'))
      throw new ConfigError('', `unexpected argument '${arg}' (options start with --)`);
    const eq = arg.indexOf('=');
    let name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
    let value: string | undefined = eq >= 0 ? arg.slice(eq + 1) : undefined;
    let key = FLAG_NAMES.get(name);
    if (!key && (name.startsWith('no-') || name.startsWith('no_'))) {
      const negated = FLAG_NAMES.get(name.slice(3));
      if (negated && spec(negated).type.kind === 'boolean' && value === undefined) {
        key = negated;
        name = name.slice(3);
        value = 'false';
      }
    }
    if (!key) {
      const guess = closest(name);
      throw new ConfigError(
        name,
        `unknown option --${name}${guess ? ` (did you mean --${kebab(guess)}?)` : ''}; see --help`,
      );
    }
    if (value === undefined) {
      if (spec(key).type.kind === 'boolean') value = 'true';
      else if (i + 1 < argv.length) value = argv[++i];
      else throw new ConfigError(key, `option --${name} needs a value`);
    }
    // Errors name the flag as it was typed: the user finds it on their own command line.
    const parsed = parseText(key, value, `--${name}`);
    checkValue(key, spec(key).type, parsed, `--${name}`);
    out[key] = parsed;
  }
  return out as Partial<ConfigInput>;
}

function showDefault(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v) : JSON.stringify(v);
}

function typeHint(t: TypeSpec<unknown>): string {
  if (t.kind === 'enum') return t.values?.join('|') ?? '';
  if (t.kind === 'object') return 'json';
  if (t.kind === 'string[]') return 'a,b,…';
  if (t.kind === 'number[]') return 'x,y,…';
  return t.kind === 'boolean' ? '' : t.kind;
}

/** --help text: every option with its type, default, one line of help and the TRL name. */
export function configHelp(): string {
  const lines = ['Options (--kebab-case or --snake_case; TRL option names are accepted too):', ''];
  for (const key of CONFIG_KEYS) {
    const s = spec(key);
    const hint = typeHint(s.type);
    const flag = `  --${kebab(key)}${hint ? ` <${hint}>` : ''}`;
    const trl = s.trl ? ` [TRL ${s.trl}]` : '';
    const limit = s.type.limit ? `; at most ${s.type.limit.max}` : '';
    lines.push(`${flag.padEnd(44)} ${s.help} (default: ${showDefault(s.default)}${limit})${trl}`);
  }
  lines.push('  --help'.padEnd(45) + 'show this text');
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------
// Shareable URLs: only fields that differ from the defaults, camelCase keys.
// ---------------------------------------------------------------------------------------------
function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

export function configToUrlParams(config: Config): URLSearchParams {
  const params = new URLSearchParams();
  const defaults = defaultConfig();
  for (const key of CONFIG_KEYS) {
    let v: unknown = config[key];
    // Implicit values stay implicit so that the URL follows epsilon and the reward list.
    if (key === 'epsilonHigh' && v === config.epsilon) continue;
    if (key === 'rewardWeights' && config.rewardWeights.every((w) => w === 1)) continue;
    if (key === 'taskOptions') {
      // Only the options that differ from that task's own defaults.
      const filled = resolveTaskOptions(config.task, {});
      v = Object.fromEntries(
        Object.entries(config.taskOptions).filter(([k, x]) => filled[k] !== x),
      );
      if (Object.keys(v as object).length === 0) continue;
    } else if (sameJson(v, (defaults as Record<string, unknown>)[key])) {
      continue;
    }
    params.set(
      key,
      typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean'
        ? String(v)
        : JSON.stringify(v),
    );
  }
  return params;
}

/** The fields a URL sets (feed to resolveConfig); unknown parameters throw, naming the key. */
export function configFromUrlParams(params: URLSearchParams | string): Partial<ConfigInput> {
  const p = typeof params === 'string' ? new URLSearchParams(params) : params;
  const out: Record<string, unknown> = {};
  for (const [name, raw] of p) {
    if (!Object.prototype.hasOwnProperty.call(CONFIG_SCHEMA, name)) {
      const guess = closest(name);
      throw new ConfigError(
        name,
        `unknown URL parameter '${name}'${guess ? ` (did you mean '${guess}'?)` : ''}`,
      );
    }
    const key = name as ConfigKey;
    const parsed = parseText(key, raw);
    checkValue(key, spec(key).type, parsed);
    out[key] = parsed;
  }
  const idProblem = rewardIdsProblem(out);
  if (idProblem) throw new ConfigError(idProblem.key, idProblem.message);
  return out as Partial<ConfigInput>;
}

/** Schema rows for the TRL export and docs: key, TRL name, default, help, export note. */
export function configSchemaRows(): {
  key: ConfigKey;
  trl: string | null;
  default: unknown;
  help: string;
  exportNote?: string;
}[] {
  return CONFIG_KEYS.map((key) => {
    const s = spec(key);
    return {
      key,
      trl: s.trl,
      default: s.default,
      help: s.help,
      ...(s.exportNote ? { exportNote: s.exportNote } : {}),
    };
  });
}
