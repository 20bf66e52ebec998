// The SFT stage's options (TRL SFTConfig's names in camelCase, TRL's defaults) and how they are
// read from a recipe, a config file or a command line. Apart from the loop (sft.ts) so that what
// only checks options (a recipe's parser, the page, the CLI's help) does not load the GPU code.
import type { LrScheduler } from '../optim/schedule';
import { overLimitMessage, type SizeLimit } from '../core/limits';
import { checkLoraOptions, LORA_ALPHA_MAX } from '../core/lora';
import { loraOptionsOf, MAX_SEQUENCE_TOKENS, MAX_STEPS, NF4_NEEDS_PEFT } from '../grpo/config';

/** How the frozen base of a LoRA stage is stored (the GRPO config's dtype, same values). */
export const SFT_DTYPES = ['auto', 'bfloat16', 'float16', 'float32', 'nf4'] as const;

/** The SFT stage's options: TRL SFTConfig names in camelCase, TRL's defaults. */
export interface SftConfig {
  learningRate: number;
  numTrainEpochs: number;
  /** Optimizer steps of the run; −1: numTrainEpochs epochs (TRL max_steps). */
  maxSteps: number;
  perDeviceTrainBatchSize: number;
  gradientAccumulationSteps: number;
  /** Longest sequence in tokens (truncated from the end); null: no limit. */
  maxLength: number | null;
  /** Prompt-completion rows: loss on the completion only; null = TRL's default (on). */
  completionOnlyLoss: boolean | null;
  /** "messages" rows: loss on the assistant turns only. */
  assistantOnlyLoss: boolean;
  lrSchedulerType: LrScheduler;
  warmupRatio: number;
  /** Wins over warmupRatio when > 0. */
  warmupSteps: number;
  /** Global gradient-norm clip; 0 = off. */
  maxGradNorm: number;
  weightDecay: number;
  adamBeta1: number;
  adamBeta2: number;
  adamEpsilon: number;
  seed: number;
  /** A checkpoint every saveSteps optimizer steps, and after the last. */
  saveSteps: number;
  /** The CLI prints a progress line every loggingSteps steps (metrics.jsonl has every step). */
  loggingSteps: number;
  /** Keep each layer's input only and recompute the layer in backward (same gradients). */
  gradientCheckpointing: boolean;
  /** MiB the LM head's logits may take at once (rows go through it in chunks); the GRPO option. */
  logitsMemoryMiB: number;
  // LoRA (PEFT) as the GRPO config takes it (TRL ModelConfig's names, SFTTrainer's peft_config):
  // adapters train, the base stays frozen in `dtype` (nf4: QLoRA).
  usePeft: boolean;
  loraR: number;
  loraAlpha: number;
  /** Only 0: the GRPO config's rule (no adapter-input dropout is implemented). */
  loraDropout: number;
  loraTargetModules: string[];
  useRslora: boolean;
  dtype: (typeof SFT_DTYPES)[number];
  useBnbNestedQuant: boolean;
}

type OptionKind =
  | 'number'
  | 'int'
  | 'boolean'
  | 'nullable-boolean'
  | 'nullable-int'
  | 'scheduler'
  | 'string-list'
  | 'dtype';

export interface SftOption {
  key: keyof SftConfig;
  kind: OptionKind;
  help: string;
  /** Smallest allowed value (numbers). */
  min?: number;
  /** min itself is refused (LoRA α: a zero scale would train adapters that change nothing). */
  exclusiveMin?: boolean;
  /** Largest allowed value of a range (learning rate, β); refused above with "must be ≤". */
  max?: number;
  /** max itself is refused (AdamW's β: β = 1 divides by 1 − β^t = 0). */
  exclusiveMax?: boolean;
  /** A count that sizes work or memory: refused above it with the limit's message. */
  limit?: SizeLimit;
}

/** TRL SFTConfig's defaults (those that differ from TrainingArguments' are SFTConfig's own). */
export const SFT_DEFAULTS: SftConfig = {
  learningRate: 2e-5,
  numTrainEpochs: 3,
  maxSteps: -1,
  perDeviceTrainBatchSize: 8,
  gradientAccumulationSteps: 1,
  maxLength: 1024,
  completionOnlyLoss: null,
  assistantOnlyLoss: false,
  lrSchedulerType: 'linear',
  warmupRatio: 0,
  warmupSteps: 0,
  maxGradNorm: 1,
  weightDecay: 0,
  adamBeta1: 0.9,
  adamBeta2: 0.999,
  adamEpsilon: 1e-8,
  seed: 42,
  saveSteps: 500,
  loggingSteps: 10,
  gradientCheckpointing: false,
  logitsMemoryMiB: 256,
  usePeft: false,
  loraR: 16,
  loraAlpha: 32,
  loraDropout: 0,
  loraTargetModules: ['all-linear'],
  useRslora: false,
  dtype: 'float32',
  useBnbNestedQuant: false,
};

export const SFT_OPTIONS: readonly SftOption[] = [
  {
    key: 'learningRate',
    kind: 'number',
    min: 0,
    max: 1,
    help: 'peak learning rate, ≤ 1 (TRL SFT: 2e-5)',
  },
  {
    key: 'numTrainEpochs',
    kind: 'number',
    min: 0,
    limit: { max: 10_000, unit: 'epochs' },
    help: 'passes over the data (3)',
  },
  {
    key: 'maxSteps',
    kind: 'int',
    min: -1,
    limit: { max: MAX_STEPS, unit: 'steps' },
    help: 'optimizer steps; −1: from the epochs (-1)',
  },
  {
    key: 'perDeviceTrainBatchSize',
    kind: 'int',
    min: 1,
    limit: { max: 4096, unit: 'examples per micro-batch' },
    help: 'examples per micro-batch (8)',
  },
  {
    key: 'gradientAccumulationSteps',
    kind: 'int',
    min: 1,
    limit: { max: 4096, unit: 'micro-batches per step' },
    help: 'micro-batches per optimizer step (1; packed into one batch of the same loss)',
  },
  {
    key: 'maxLength',
    kind: 'nullable-int',
    min: 2,
    limit: { max: MAX_SEQUENCE_TOKENS, unit: 'tokens' },
    help: 'longest sequence in tokens, cut from the end; null: no limit (1024)',
  },
  {
    key: 'completionOnlyLoss',
    kind: 'nullable-boolean',
    help: 'prompt-completion rows: loss on the completion only (null: on)',
  },
  {
    key: 'assistantOnlyLoss',
    kind: 'boolean',
    help: '"messages" rows: loss on the assistant turns only (false)',
  },
  { key: 'lrSchedulerType', kind: 'scheduler', help: 'linear, cosine or constant (linear)' },
  { key: 'warmupRatio', kind: 'number', min: 0, help: 'warmup as a share of the steps (0)' },
  { key: 'warmupSteps', kind: 'int', min: 0, help: 'warmup steps; wins over the ratio (0)' },
  { key: 'maxGradNorm', kind: 'number', min: 0, help: 'gradient-norm clip, 0 = off (1)' },
  { key: 'weightDecay', kind: 'number', min: 0, help: 'AdamW weight decay (0)' },
  {
    key: 'adamBeta1',
    kind: 'number',
    min: 0,
    max: 1,
    exclusiveMax: true,
    help: 'AdamW β1, < 1 (0.9)',
  },
  {
    key: 'adamBeta2',
    kind: 'number',
    min: 0,
    max: 1,
    exclusiveMax: true,
    help: 'AdamW β2, < 1 (0.999)',
  },
  { key: 'adamEpsilon', kind: 'number', min: 0, help: 'AdamW ε (1e-8)' },
  { key: 'seed', kind: 'int', help: 'the shuffle’s seed (42)' },
  { key: 'saveSteps', kind: 'int', min: 1, help: 'a checkpoint every this many steps (500)' },
  { key: 'loggingSteps', kind: 'int', min: 1, help: 'a progress line every this many steps (10)' },
  {
    key: 'gradientCheckpointing',
    kind: 'boolean',
    help: "keep each layer's input only, recompute it in backward: less memory, ~1/3 more compute (false)",
  },
  {
    key: 'logitsMemoryMiB',
    kind: 'number',
    min: 0,
    exclusiveMin: true,
    limit: { max: 65_536, unit: 'MiB' },
    help: "MiB the LM head's logits may take at once (256)",
  },
  {
    key: 'usePeft',
    kind: 'boolean',
    help: 'train LoRA adapters only, the base frozen (TRL use_peft; false: every weight trains)',
  },
  {
    key: 'loraR',
    kind: 'int',
    min: 1,
    max: 1024,
    help: 'LoRA rank r (16)',
  },
  {
    key: 'loraAlpha',
    kind: 'number',
    min: 0,
    exclusiveMin: true,
    max: LORA_ALPHA_MAX,
    help: 'LoRA α > 0: adapters scaled by α / r, α / √r with rslora (32)',
  },
  { key: 'loraDropout', kind: 'number', min: 0, max: 1, help: 'LoRA dropout: only 0 (0)' },
  {
    key: 'loraTargetModules',
    kind: 'string-list',
    help: 'projections with adapters, comma-separated: all-linear or q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (all-linear)',
  },
  { key: 'useRslora', kind: 'boolean', help: 'rank-stabilised LoRA, α / √r (false)' },
  {
    key: 'dtype',
    kind: 'dtype',
    help: "storage of the frozen base under LoRA: float32, bfloat16, float16, auto (the checkpoint's), nf4 (QLoRA); a 4-bit checkpoint stays NF4 (float32)",
  },
  {
    key: 'useBnbNestedQuant',
    kind: 'boolean',
    help: 'dtype nf4: double-quantised block scales (false)',
  },
];

/** camelCase → TRL's snake_case name. */
export const trlName = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

const camel = (name: string) => name.replace(/[-_]([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/**
 * A full SftConfig from options keyed by camelCase, snake_case (TRL) or kebab-case names; strings
 * (from a command line) are parsed by the option's kind. An unknown name or a bad value throws
 * naming the option.
 */
export function resolveSftConfig(options: Readonly<Record<string, unknown>> = {}): SftConfig {
  const out: Record<string, unknown> = { ...SFT_DEFAULTS };
  const byKey = new Map(SFT_OPTIONS.map((o) => [o.key as string, o]));
  for (const [name, raw] of Object.entries(options)) {
    const option = byKey.get(camel(name));
    if (!option) throw new Error(`unknown SFT option '${name}'`);
    out[option.key] = parseOption(option, raw);
  }
  const config = out as unknown as SftConfig;
  if (config.maxSteps === 0) throw new Error('maxSteps must be −1 (use the epochs) or ≥ 1');
  if (config.dtype === 'nf4' && !config.usePeft) throw new Error(NF4_NEEDS_PEFT);
  if (config.usePeft || config.loraDropout !== 0) {
    try {
      checkLoraOptions({
        r: config.loraR,
        alpha: config.loraAlpha,
        targetModules: config.loraTargetModules,
        useRslora: config.useRslora,
        dropout: config.loraDropout,
      });
    } catch (err) {
      throw new Error(`SFT: ${(err as Error).message}`, { cause: err });
    }
  }
  return config;
}

/** The stage's LoRA settings, or null for a full fine-tune (the GRPO config's reading of them). */
export const sftLoraOptions = (config: SftConfig) => loraOptionsOf(config);

function parseOption(o: SftOption, raw: unknown): unknown {
  const name = trlName(o.key);
  const bad = (why: string) => new Error(`${name}: ${why}, got ${JSON.stringify(raw)}`);
  const text = typeof raw === 'string' ? raw.trim() : null;
  if (
    (o.kind === 'nullable-int' || o.kind === 'nullable-boolean') &&
    (raw === null || text === 'null')
  )
    return null;
  if (o.kind === 'boolean' || o.kind === 'nullable-boolean') {
    if (typeof raw === 'boolean') return raw;
    if (text === 'true') return true;
    if (text === 'false') return false;
    throw bad('expected true or false');
  }
  if (o.kind === 'scheduler') {
    if (raw === 'linear' || raw === 'cosine' || raw === 'constant') return raw;
    throw bad('expected linear, cosine or constant');
  }
  if (o.kind === 'dtype') {
    if ((SFT_DTYPES as readonly unknown[]).includes(raw)) return raw;
    throw bad(`expected one of ${SFT_DTYPES.join(', ')}`);
  }
  if (o.kind === 'string-list') {
    // A list (a recipe, a checkpoint's config) or comma-separated names (a command line).
    const list = Array.isArray(raw) ? raw : text !== null ? text.split(',') : null;
    const names = list?.map((v) => (typeof v === 'string' ? v.trim() : v));
    if (!names || names.some((v) => typeof v !== 'string' || v === ''))
      throw bad('expected a list of names');
    return names;
  }
  const value = typeof raw === 'number' ? raw : text !== null && text !== '' ? Number(text) : NaN;
  if (!Number.isFinite(value)) throw bad('expected a number');
  if ((o.kind === 'int' || o.kind === 'nullable-int') && !Number.isInteger(value))
    throw bad('expected an integer');
  if (o.min !== undefined && (o.exclusiveMin ? value <= o.min : value < o.min))
    throw bad(`must be ${o.exclusiveMin ? '>' : '≥'} ${o.min}`);
  if (o.max !== undefined && (o.exclusiveMax ? value >= o.max : value > o.max))
    throw bad(`must be ${o.exclusiveMax ? '<' : '≤'} ${o.max}`);
  if (o.limit !== undefined && value > o.limit.max)
    throw new Error(overLimitMessage(name, value, o.limit));
  return value;
}
