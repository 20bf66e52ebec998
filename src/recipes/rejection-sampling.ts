// Rejection sampling (DeepSeek-R1 §2.3.3): sample k completions per prompt from a checkpoint and
// keep only those a rule accepts, as a new supervised (SFT) set. R1 kept the RL model's correct,
// readable reasoning; here a completion is kept when the task's verifier accepts its answer, the
// format reward passes, it ended with EOS (a truncated completion would teach the model not to
// stop), and the optional filters pass: length bounds, the language-consistency score, and no
// duplicate of an already kept completion of the same prompt. The same generator, problems, seed
// and options give the same set (the draws are fixed by seed and stream, as in evaluate()).
// rejectionSampleFromWeights is the whole step for any front end (the CLI's `npm run
// rejection-sample`, a recipe stage): a model's weights and a run's config in, the run's own
// training prompts (never its held-out ones) sampled, the report out; rejectionFiles writes it as
// the three files both front ends save.
import type { LlamaConfig } from '../core/model-config';
import type { Engine } from '../engine/engine';
import { GpuLlama } from '../model/llama';
import { frozenDtypeOf, type WeightSource } from '../model/parameters';
import { Sampler, type TextGenerator } from '../model/sampler';
import { createTask, trainEvalStream } from '../tasks/index';
import type { Problem, Task } from '../tasks/types';
import type { Config } from '../grpo/config';
import { languageConsistencyReward, type LanguageScript } from '../rewards/language-consistency';
import { extractAnswer, formatOkAfterPrompt } from '../rewards/rewards';
import { renderPrompt, type TrainerTokenizer } from '../grpo/trainer';
import { checkCount, overLimitMessage } from '../core/limits';
import { REJECTION_LIMITS } from './limits';

export interface RejectionSamplingOptions {
  /** Completions sampled per prompt. */
  k: number;
  seed: number;
  temperature: number;
  topK?: number;
  topP?: number;
  minP?: number;
  maxCompletionLength: number;
  /** Prompts decoded per generate() call (bounded GPU memory). Default 16. */
  batchSize?: number;
  /** Keep only completions the format reward accepts. Default true. */
  requireFormat?: boolean;
  /** Completion length bounds in tokens (EOS included), inclusive; absent = unbounded. */
  minLength?: number;
  maxLength?: number;
  /** Keep only completions whose think text is at least `minLanguageConsistency` in `script`. */
  language?: { script: LanguageScript; minLanguageConsistency: number } | null;
  /** Keep one copy of identical completion texts of the same prompt. Default true. */
  dedupe?: boolean;
}

/** Why a completion was not kept; a rejected completion lists every reason that applies. */
export type RejectReason =
  | 'wrong' // the verifier rejected the answer
  | 'no-answer' // no <answer>…</answer>
  | 'unverifiable' // the problem has no verifier (an unlabelled dataset row)
  | 'format'
  | 'truncated'
  | 'too-short'
  | 'too-long'
  | 'language'
  | 'duplicate';

export interface RejectionSample {
  problemId: string;
  /** The prompt as the model saw it (template applied). */
  prompt: string;
  completion: string;
  /** Completion tokens, EOS included. */
  length: number;
  kept: boolean;
  /** Empty when kept. */
  reasons: RejectReason[];
}

export interface RejectionPromptCount {
  problemId: string;
  sampled: number;
  kept: number;
}

export interface RejectionSamplingReport {
  samples: RejectionSample[];
  perPrompt: RejectionPromptCount[];
  sampled: number;
  kept: number;
  /** kept / sampled (NaN when nothing was sampled). */
  yield: number;
  /** How many rejected completions each reason applied to. */
  reasons: Record<RejectReason, number>;
}

const NO_REASONS: Record<RejectReason, number> = {
  wrong: 0,
  'no-answer': 0,
  unverifiable: 0,
  format: 0,
  truncated: 0,
  'too-short': 0,
  'too-long': 0,
  language: 0,
  duplicate: 0,
};

export interface RejectionContext {
  generator: TextGenerator;
  tokenizer: TrainerTokenizer;
  task: Pick<Task, 'verify'>;
  renderPrompt(problem: Problem): { text: string; ids: number[] };
}

function checkOptions(o: RejectionSamplingOptions): void {
  checkCount('rejection sampling: k', o.k, 1, REJECTION_LIMITS.k);
  if (o.batchSize !== undefined)
    checkCount('rejection sampling: batchSize', o.batchSize, 1, REJECTION_LIMITS.batchSize);
  if (o.minLength !== undefined && o.maxLength !== undefined && o.minLength > o.maxLength) {
    throw new RangeError(`rejection sampling: minLength ${o.minLength} > maxLength ${o.maxLength}`);
  }
  const min = o.language?.minLanguageConsistency;
  if (min !== undefined && !(min >= 0 && min <= 1)) {
    throw new RangeError(
      `rejection sampling: minLanguageConsistency must be in [0, 1], got ${min}`,
    );
  }
}

/** Why `completion` would be rejected, ignoring duplicates (checked against what was kept).
 * `prompt` is the rendered prompt: the format check judges the model's whole turn, as the format
 * reward does (a chat template's opened `<think>` counts; docs/grpo.md §1). */
export function rejectReasons(
  prompt: string,
  completion: string,
  length: number,
  finished: boolean,
  problem: Problem,
  task: Pick<Task, 'verify'>,
  options: RejectionSamplingOptions,
): RejectReason[] {
  const reasons: RejectReason[] = [];
  const answer = extractAnswer(completion);
  if (problem.verifier.kind === 'none') reasons.push('unverifiable');
  else if (answer === null) reasons.push('no-answer');
  else if (task.verify(answer, problem) !== true) reasons.push('wrong');
  if ((options.requireFormat ?? true) && !formatOkAfterPrompt(prompt, completion)) {
    reasons.push('format');
  }
  if (!finished) reasons.push('truncated');
  if (options.minLength !== undefined && length < options.minLength) reasons.push('too-short');
  if (options.maxLength !== undefined && length > options.maxLength) reasons.push('too-long');
  if (options.language) {
    const score = languageConsistencyReward(completion, options.language.script);
    if (score === null || score < options.language.minLanguageConsistency) reasons.push('language');
  }
  return reasons;
}

/** Samples `options.k` completions of every problem and keeps the ones the rules accept. */
export async function rejectionSample(
  ctx: RejectionContext,
  problems: readonly Problem[],
  options: RejectionSamplingOptions,
): Promise<RejectionSamplingReport> {
  checkOptions(options);
  const { generator, tokenizer, task } = ctx;
  const batchSize = options.batchSize ?? 16;
  const samples: RejectionSample[] = [];
  const perPrompt: RejectionPromptCount[] = [];
  const reasons = { ...NO_REASONS };
  for (let start = 0; start < problems.length; start += batchSize) {
    const chunk = problems.slice(start, start + batchSize);
    const rendered = chunk.map((p) => ctx.renderPrompt(p));
    const result = await generator.generate(
      rendered.flatMap((r) => Array.from({ length: options.k }, () => r.ids)),
      {
        maxNewTokens: options.maxCompletionLength,
        temperature: options.temperature,
        topK: options.topK ?? 0,
        topP: options.topP ?? 1,
        minP: options.minP ?? 0,
        seed: options.seed,
        // Each batch draws from its own stream, named by its first prompt's index (as
        // evaluate()'s sampled stream is), so the seed fixes every draw of the whole set.
        stream: 0x50000000 + start,
        eosTokenIds: tokenizer.eosTokenIds,
        padTokenId: tokenizer.padTokenId,
      },
    );
    chunk.forEach((problem, b) => {
      const keptTexts = new Set<string>();
      let kept = 0;
      for (let j = 0; j < options.k; j++) {
        const n = b * options.k + j;
        const ids = result.completions[n];
        const completion = tokenizer.decode(ids, { skipSpecialTokens: true });
        const why = rejectReasons(
          rendered[b].text,
          completion,
          ids.length,
          result.finished[n],
          problem,
          task,
          options,
        );
        if (why.length === 0 && (options.dedupe ?? true) && keptTexts.has(completion)) {
          why.push('duplicate');
        }
        for (const r of why) reasons[r]++;
        if (why.length === 0) {
          kept++;
          keptTexts.add(completion);
        }
        samples.push({
          problemId: problem.id,
          prompt: rendered[b].text,
          completion,
          length: ids.length,
          kept: why.length === 0,
          reasons: why,
        });
      }
      perPrompt.push({ problemId: problem.id, sampled: options.k, kept });
    });
  }
  const kept = samples.filter((s) => s.kept).length;
  return {
    samples,
    perPrompt,
    sampled: samples.length,
    kept,
    yield: samples.length ? kept / samples.length : NaN,
    reasons,
  };
}

/**
 * The kept completions as a JSONL SFT set in TRL's prompt-completion format (one
 * `{"prompt", "completion"}` object a line; `problem_id` says where each came from), the format
 * the SFT stage reads.
 */
export function toSftJsonl(report: Pick<RejectionSamplingReport, 'samples'>): string {
  return report.samples
    .filter((s) => s.kept)
    .map(
      (s) =>
        JSON.stringify({ prompt: s.prompt, completion: s.completion, problem_id: s.problemId }) +
        '\n',
    )
    .join('');
}

/**
 * The prompts to sample (`prompts`, default the run's steps × perStepPrompts), checked with k
 * against REJECTION_LIMITS: prompts, and prompts × k samples. `label` names the prompts' option
 * as the front end spells it (`--prompts`, a recipe stage's `prompts`).
 */
export function checkRejectionCounts(
  prompts: number | undefined,
  k: number,
  config: Pick<Config, 'steps' | 'perStepPrompts'>,
  label = 'rejection sampling: prompts',
): number {
  const count = prompts ?? config.steps * config.perStepPrompts;
  checkCount(
    prompts === undefined ? `${label} (the run's steps × perStepPrompts)` : label,
    count,
    1,
    REJECTION_LIMITS.prompts,
  );
  if (count * k > REJECTION_LIMITS.samples.max)
    throw new RangeError(
      overLimitMessage(`${label} × k = ${count} × ${k} =`, count * k, REJECTION_LIMITS.samples),
    );
  return count;
}

/**
 * The run's first `count` training problems, in the order the run draws them: the training stream
 * of trainEvalStream with the run's seed and held-out count, so no held-out prompt is among them.
 * A finite dataset (a JSONL task) gives each row at most once, so fewer when it has fewer rows.
 */
export function trainingProblems(
  task: Task,
  config: Pick<Config, 'seed' | 'steps' | 'perStepPrompts' | 'evalPrompts'>,
  count: number,
): Problem[] {
  checkCount('rejection sampling: prompts', count, 1, REJECTION_LIMITS.prompts);
  if (task.splits) {
    // The training split repeats the dataset epoch after epoch: one copy of each row.
    const seen = new Set<string>();
    return task
      .splits(config.seed, count, config.evalPrompts)
      .train.filter((p) => !seen.has(p.id) && seen.add(p.id))
      .slice(0, count);
  }
  // The held-out draw depends on the run's length (its first prompts are never held out), so the
  // stream is the run's, steps × perStepPrompts long; past its end it goes on drawing, still
  // without the run's held-out prompts.
  const { train } = trainEvalStream(
    task,
    config.seed,
    config.steps * config.perStepPrompts,
    config.evalPrompts,
  );
  return Array.from({ length: count }, (_, i) => train.at(i));
}

export interface RejectionRunSetup {
  engine: Engine;
  /** The weights to sample from (a checkpoint's, LoRA adapters merged in): a Map, or a reader
   * streamed into the GPU (a 4-bit checkpoint stays NF4 there; other weights sample in f32). */
  model: { config: LlamaConfig; weights: WeightSource };
  tokenizer: TrainerTokenizer;
  /** The run's config: task, taskOptions, template, seed, steps · perStepPrompts and evalPrompts
   * choose the prompts; temperature, topK, topP, minP and maxCompletionLength are the sampling
   * defaults that `options` may override. */
  config: Config;
  /** Task 'jsonl': the dataset's text. */
  taskText?: string;
  /** Verifies answers instead of the config's task (e.g. plain Countdown for the aha preset). */
  scoringTask?: Pick<Task, 'verify'>;
  /** Training prompts to sample (default: the run's, steps × perStepPrompts). */
  prompts?: number;
  /** k and the filters; seed (default config.seed) and the sampling options override the config's. */
  options: Partial<RejectionSamplingOptions> & Pick<RejectionSamplingOptions, 'k'>;
}

/** The options rejectionSample runs with: the setup's, the config's sampling options beneath. */
export function resolveRejectionOptions(
  config: Config,
  options: RejectionRunSetup['options'],
): RejectionSamplingOptions {
  return {
    seed: config.seed,
    temperature: config.temperature,
    topK: config.topK,
    topP: config.topP,
    minP: config.minP ?? 0,
    maxCompletionLength: config.maxCompletionLength,
    ...options,
  };
}

/**
 * Rejection sampling of a model on a run's training prompts: loads the weights on the GPU, samples
 * `options.k` completions of each prompt, keeps what the rules accept, and frees the model.
 */
export async function rejectionSampleFromWeights(setup: RejectionRunSetup): Promise<{
  report: RejectionSamplingReport;
  problems: Problem[];
  options: RejectionSamplingOptions;
}> {
  const { engine, config, tokenizer } = setup;
  const options = resolveRejectionOptions(config, setup.options);
  checkOptions(options);
  // Every bound before the prompts are drawn or the model is loaded.
  const count = checkRejectionCounts(setup.prompts, options.k, config);
  const task = createTask(config.task, config.taskOptions, { text: setup.taskText });
  const problems = trainingProblems(task, config, count);
  const { config: modelConfig, weights } = setup.model;
  const model = await GpuLlama.loadFrom(engine, modelConfig, weights, {
    frozenDtype: frozenDtypeOf('float32', modelConfig, weights),
  });
  try {
    const report = await rejectionSample(
      {
        generator: new Sampler(engine, model),
        tokenizer,
        task: setup.scoringTask ?? task,
        renderPrompt: (p) => renderPrompt(task, tokenizer, p, config.template, config),
      },
      problems,
      options,
    );
    return { report, problems, options };
  } finally {
    model.destroy();
  }
}

/** What a front end saves of a report: the kept set (sft.jsonl), every sample with why it was
 * or was not kept (samples.jsonl) and the counts (report.json, with `extra` fields first). */
export function rejectionFiles(
  report: RejectionSamplingReport,
  extra: Record<string, unknown> = {},
): { 'sft.jsonl': string; 'samples.jsonl': string; 'report.json': string } {
  const { samples, ...counts } = report;
  return {
    'sft.jsonl': toSftJsonl(report),
    'samples.jsonl': samples.map((s) => JSON.stringify(s) + '\n').join(''),
    'report.json': JSON.stringify({ ...extra, ...counts }, null, 2) + '\n',
  };
}
