// `npm run plan`'s work, without side effects (src/cli/plan.ts prints it; tests call it): the
// memory plan of a run (train/run.ts runPlanInput → model/memory-plan.ts, what the page and the
// trainer plan with) for a local Hugging Face folder or a built-in public model's config.json
// numbers, with the micro-batch chosen to fit when the user did not fix it.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { formatBytes } from '../core/format';
import { parameterCount, parseHfConfig, type LlamaConfig } from '../core/model-config';
import { parseCliArgs, resolveConfig, type Config } from '../grpo/config';
import { runPlanInput } from '../train/run';
import { findKnownModel, KNOWN_MODELS, knownModelConfig } from '../model/known-models';
import {
  chooseMicroBatch,
  deviceMemoryLimits,
  planMemory,
  type MemoryCategory,
  type MemoryPlan,
  type WeightDtype,
} from '../model/memory-plan';
import { loraAdapterSpecs } from '../core/lora';
import { PLAN, takeCommandFlags } from './_flags';
import { parseSftArgs } from './_sft';
import { resolveSftConfig, sftLoraOptions, type SftConfig } from '../train/sft-config';

const GiB = 2 ** 30;

/**
 * Budgets tried in order when --budget is not given, in GiB: half-GiB steps up to 4 GiB, then
 * common GPU memory sizes. A browser tab shares a small GPU with the desktop and other tabs, so
 * the plan does not claim a whole further GiB there only to take more sequences at a time.
 */
export const STANDARD_BUDGETS_GIB = [
  0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 6, 8, 12, 16, 24, 32, 48, 80,
] as const;

/**
 * Per-buffer limits assumed without a device: what desktop browsers grant on a discrete GPU
 * (Chrome: 2 GiB buffers and bindings). They only decide which tensors the model splits and how
 * many logits rows one binding holds.
 */
export const ASSUMED_LIMITS = { maxBufferSize: 2 * GiB, maxStorageBufferBindingSize: 2 * GiB - 4 };

/** --dtype spellings besides the config's own names. */
const DTYPE_ALIASES: Record<string, string> = {
  bf16: 'bfloat16',
  fp16: 'float16',
  f16: 'float16',
  half: 'float16',
  fp32: 'float32',
  f32: 'float32',
};

export interface PlanReport {
  model: { name: string; source: 'built-in' | 'folder'; parameters: number; trainable: number };
  /** The run's options as resolved (config names). */
  options: Record<string, unknown>;
  microBatch: number;
  /** Whether the plan chose the micro-batch (no --gradient-accumulation-steps given). */
  microBatchChosen: boolean;
  budgetBytes: number;
  /** Whether the budget is the smallest standard size that fits (no --budget given). */
  budgetChosen: boolean;
  plan: MemoryPlan;
}

interface LoadedConfig {
  name: string;
  source: 'built-in' | 'folder';
  config: LlamaConfig;
  /** config.json's torch_dtype, what dtype 'auto' keeps. */
  torchDtype: WeightDtype;
}

function loadModelConfig(model: string): LoadedConfig {
  const known = findKnownModel(model);
  if (known) {
    return {
      name: known.repo,
      source: 'built-in',
      config: knownModelConfig(known),
      torchDtype: known.torchDtype,
    };
  }
  const file = join(model, 'config.json');
  if (!existsSync(model) || !statSync(model).isDirectory() || !existsSync(file)) {
    throw new Error(
      `'${model}' is neither a built-in model (${KNOWN_MODELS.map((m) => m.name).join(', ')}) ` +
        'nor a folder holding config.json',
    );
  }
  const json = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  const dtype = json.torch_dtype ?? json.dtype;
  return {
    name: model,
    source: 'folder',
    config: parseHfConfig(json, file),
    torchDtype: dtype === 'bfloat16' || dtype === 'float16' ? dtype : 'float32',
  };
}

/** Parses `<model> [flags] [options]` and plans; throws with a message for the user. */
export function planCommand(args: readonly string[]): PlanReport {
  const [model, ...rest] = args;
  if (model === undefined || model.startsWith('--')) {
    throw new Error('usage: npm run plan -- <model> [flags] [options] (see --help)');
  }
  const { flags, rest: options } = takeCommandFlags(PLAN, rest);
  // --dtype bf16 and friends; the config's own names pass through.
  const normalised = options.map((arg, i) => {
    const prev = options[i - 1];
    if (prev === '--dtype' && DTYPE_ALIASES[arg]) return DTYPE_ALIASES[arg];
    const m = /^--dtype=(.*)$/.exec(arg);
    return m && DTYPE_ALIASES[m[1]] ? `--dtype=${DTYPE_ALIASES[m[1]]}` : arg;
  });
  if (flags.has('sft')) {
    if (flags.has('num-prompts'))
      throw new Error(
        '--num-prompts plans a GRPO run; an SFT step is --per-device-train-batch-size',
      );
    return planSftCommand(model, normalised, budgetOf(flags.get('budget')?.[0]));
  }
  const overrides: Record<string, unknown> = parseCliArgs(normalised);
  const numPrompts = flags.get('num-prompts')?.[0];
  if (numPrompts !== undefined) {
    if (!/^[1-9][0-9]*$/.test(numPrompts))
      throw new Error(`--num-prompts must be a positive integer, got '${numPrompts}'`);
    overrides.perStepPrompts = Number(numPrompts);
  }
  // Any LoRA option means LoRA, unless --no-use-peft says otherwise; so does a 4-bit base
  // (--dtype nf4: QLoRA, which only LoRA can train).
  const loraKeys = ['loraR', 'loraAlpha', 'loraTargetModules', 'useRslora'];
  if (
    overrides.usePeft === undefined &&
    (loraKeys.some((k) => k in overrides) || overrides.dtype === 'nf4')
  )
    overrides.usePeft = true;
  const fixedMicroBatch = 'gradientAccumulationSteps' in overrides;
  const loaded = loadModelConfig(model);
  const config: Config = resolveConfig(overrides);
  const input = runPlanInput(loaded.config, config, loaded.torchDtype);
  const budget = budgetOf(flags.get('budget')?.[0]);
  const maxBinding = Math.min(
    ASSUMED_LIMITS.maxBufferSize,
    ASSUMED_LIMITS.maxStorageBufferBindingSize,
  );
  let microBatch = input.microBatch!;
  let budgetBytes = budget ?? STANDARD_BUDGETS_GIB[STANDARD_BUDGETS_GIB.length - 1] * GiB;
  if (!fixedMicroBatch) {
    // The largest micro-batch (divisor of B·G) that fits: in --budget, or in the smallest
    // standard size any micro-batch fits; one sequence at a time when none does.
    const budgets = budget !== null ? [budget] : STANDARD_BUDGETS_GIB.map((g) => g * GiB);
    let chosen: number | null = null;
    for (const b of budgets) {
      chosen = chooseMicroBatch(input, b, maxBinding);
      if (chosen !== null) {
        budgetBytes = b;
        break;
      }
    }
    microBatch = chosen ?? 1;
  } else if (budget === null) {
    const peak = planMemory(input, deviceMemoryLimits(ASSUMED_LIMITS, Infinity)).peakBytes;
    budgetBytes = (STANDARD_BUDGETS_GIB.find((g) => g * GiB >= peak) ?? 80) * GiB;
  }
  const plan = planMemory(
    { ...input, microBatch },
    deviceMemoryLimits(ASSUMED_LIMITS, budgetBytes),
  );
  const trainable = trainableCount(loaded.config, plan);
  return {
    model: {
      name: loaded.name,
      source: loaded.source,
      parameters: parameterCount(loaded.config),
      trainable,
    },
    options: {
      perStepPrompts: config.perStepPrompts,
      numGenerations: config.numGenerations,
      maxPromptLength: config.maxPromptLength,
      maxCompletionLength: config.maxCompletionLength,
      beta: config.beta,
      ...memoryOptions(config),
      gradientAccumulationSteps: (config.perStepPrompts * config.numGenerations) / microBatch,
    },
    microBatch,
    microBatchChosen: !fixedMicroBatch,
    budgetBytes,
    budgetChosen: budget === null,
    plan,
  };
}

/** --budget in bytes, or null when not given. */
function budgetOf(text: string | undefined): number | null {
  if (text === undefined) return null;
  const gib = Number(text);
  if (!(gib > 0)) throw new Error(`--budget must be a positive number of GiB, got '${text}'`);
  return gib * GiB;
}

/**
 * `--sft`: the plan of an `npm run sft` run (planSftMemory's input without a dataset): one step
 * packs per-device-train-batch-size × gradient-accumulation-steps sequences of max-length tokens
 * (the model's positions when max-length is null), every column but the first predicted. No
 * micro-batch to choose (SFT packs its micro-batches); the budget is the smallest step it fits.
 */
function planSftCommand(model: string, args: readonly string[], budget: number | null): PlanReport {
  const { options, model: m, data, out, resume, columns } = parseSftArgs(args);
  if (m ?? data ?? out ?? resume ?? (columns || undefined))
    throw new Error('npm run plan --sft takes the SFT options only (no --model, --data, --out)');
  // As for GRPO: a LoRA option or a 4-bit base means LoRA unless --use-peft says otherwise.
  const loraKeys = ['loraR', 'loraAlpha', 'loraTargetModules', 'useRslora'];
  if (
    options.usePeft === undefined &&
    (loraKeys.some((k) => k in options) || options.dtype === 'nf4')
  )
    options.usePeft = 'true';
  const config = resolveSftConfig(options);
  const loaded = loadModelConfig(model);
  const lora = sftLoraOptions(config);
  const length = Math.min(
    config.maxLength ?? loaded.config.maxPositions,
    loaded.config.maxPositions,
  );
  const batch = config.perDeviceTrainBatchSize * config.gradientAccumulationSteps;
  const input = {
    config: loaded.config,
    objective: 'sft' as const,
    numPrompts: batch,
    groupSize: 1,
    promptLength: 1,
    completionLength: Math.max(1, length - 1),
    beta: 0,
    microBatch: batch,
    lora: lora ? { r: lora.r, targetModules: lora.targetModules } : null,
    dtype: !lora ? 'float32' : config.dtype === 'auto' ? loaded.torchDtype : config.dtype,
    gradientCheckpointing: config.gradientCheckpointing,
    logitsMemoryMiB: config.logitsMemoryMiB,
  };
  const peak = planMemory(input, deviceMemoryLimits(ASSUMED_LIMITS, Infinity)).peakBytes;
  const budgetBytes = budget ?? (STANDARD_BUDGETS_GIB.find((g) => g * GiB >= peak) ?? 80) * GiB;
  const plan = planMemory(input, deviceMemoryLimits(ASSUMED_LIMITS, budgetBytes));
  return {
    model: {
      name: loaded.name,
      source: loaded.source,
      parameters: parameterCount(loaded.config),
      trainable: trainableCount(loaded.config, plan),
    },
    options: {
      sft: true,
      perDeviceTrainBatchSize: config.perDeviceTrainBatchSize,
      gradientAccumulationSteps: config.gradientAccumulationSteps,
      maxLength: config.maxLength,
      ...memoryOptions(config),
    },
    microBatch: batch,
    microBatchChosen: false,
    budgetBytes,
    budgetChosen: budget === null,
    plan,
  };
}

/** The options a report names that both kinds of run share (LoRA, base storage, memory). */
const memoryOptions = (c: Config | SftConfig) => ({
  usePeft: c.usePeft,
  loraR: c.usePeft ? c.loraR : null,
  loraTargetModules: c.usePeft ? c.loraTargetModules : null,
  dtype: c.dtype,
  gradientCheckpointing: c.gradientCheckpointing,
  logitsMemoryMiB: c.logitsMemoryMiB,
});

/** Parameters that train: the adapters under LoRA, else every one. */
function trainableCount(config: LlamaConfig, plan: MemoryPlan): number {
  const lora = plan.input.lora;
  if (!lora) return parameterCount(config);
  return loraAdapterSpecs(config, { ...lora, alpha: 1, useRslora: false, dropout: 0 }).reduce(
    (s, spec) => s + spec.shape[0] * spec.shape[1],
    0,
  );
}

const CATEGORY_TEXT: Record<MemoryCategory, string> = {
  parameters: 'model weights (and LoRA adapters)',
  gradients: 'gradients of what trains',
  optimizer: 'AdamW moments (m, v) and grad-norm scratch',
  reference: 'reference copy and its forward (full fine-tune, β > 0)',
  sampling: 'KV cache, decoder scratch, sampler buffers',
  training: 'activations and backward scratch of one micro-batch',
  grpo: 'per-token buffers of one update',
};

const millions = (n: number) => `${(n / 1e6).toFixed(n < 1e7 ? 2 : 1)} M`;

/** The report as text: the run, bytes by category, the peak, the verdict and what to change. */
export function formatPlanReport(r: PlanReport): string {
  const { plan } = r;
  const i = plan.input;
  const N = i.numPrompts * i.groupSize;
  const lines: string[] = [];
  const what = r.model.source === 'built-in' ? 'built-in config.json numbers' : 'config.json';
  lines.push(`${r.model.name} (${what}): ${millions(r.model.parameters)} parameters`);
  const training = i.lora
    ? `LoRA r = ${i.lora.r} (${[i.lora.targetModules].flat().join(', ')}): ${millions(r.model.trainable)} trainable, base ${i.dtype === 'nf4' ? 'nf4 (4-bit NF4 projections, scale per 64; bf16 embedding and head)' : i.dtype}`
    : `full fine-tune, float32: ${millions(r.model.trainable)} trainable`;
  lines.push(training);
  if (i.objective === 'sft') {
    lines.push(
      `SFT: ${N} sequences of ${i.promptLength + i.completionLength} tokens per step (one packed batch), ` +
        `gradient checkpointing ${i.gradientCheckpointing ? 'on' : 'off'}, logits ≤ ${i.logitsMemoryMiB} MiB`,
    );
  } else
    lines.push(
      `B ${i.numPrompts} × G ${i.groupSize} = ${N} sequences of ${i.promptLength} + ${i.completionLength} tokens, ` +
        `micro-batch ${r.microBatch}${r.microBatchChosen ? ' (chosen: the largest that fits)' : ''}, ` +
        `gradient checkpointing ${i.gradientCheckpointing ? 'on' : 'off'}, logits ≤ ${i.logitsMemoryMiB} MiB, β = ${i.beta}`,
    );
  lines.push('');
  for (const [category, bytes] of Object.entries(plan.byCategory) as [MemoryCategory, number][]) {
    if (bytes === 0) continue;
    // An SFT step's per-token buffers are its cross-entropy's, not GRPO's.
    const name = category === 'grpo' && i.objective === 'sft' ? 'loss' : category;
    lines.push(
      `  ${name.padEnd(11)} ${formatBytes(bytes).padStart(10)}  ${CATEGORY_TEXT[category]}`,
    );
  }
  lines.push(`  ${'peak'.padEnd(11)} ${formatBytes(plan.peakBytes).padStart(10)}`);
  lines.push('');
  const budget = `${formatBytes(r.budgetBytes)}${r.budgetChosen ? ' (the smallest budget step it fits)' : ''}`;
  if (plan.fits) {
    lines.push(`Fits in ${budget}: ${formatBytes(r.budgetBytes - plan.peakBytes)} to spare.`);
  } else {
    lines.push(`Does not fit in ${budget}. What to change:`);
    for (const s of plan.suggestions) lines.push(`  - ${s}`);
  }
  return lines.join('\n');
}

/** The report as JSON (buffers included: name, category, phase, shape, bytes, count). */
export function planReportJson(r: PlanReport): string {
  const { plan } = r;
  return JSON.stringify(
    {
      model: r.model,
      options: r.options,
      microBatch: r.microBatch,
      microBatchChosen: r.microBatchChosen,
      budgetBytes: r.budgetBytes,
      budgetChosen: r.budgetChosen,
      peakBytes: plan.peakBytes,
      peakGiB: plan.peakBytes / GiB,
      fits: plan.fits,
      byCategory: plan.byCategory,
      persistentBytes: plan.persistentBytes,
      samplingCallBytes: plan.samplingBytes,
      updateBytes: plan.trainingBytes,
      suggestions: plan.suggestions,
      message: plan.message,
      buffers: plan.buffers,
    },
    null,
    2,
  );
}
