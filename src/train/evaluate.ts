// Evaluation on held-out prompts: greedy accuracy, pass@k and majority vote (cons@k) over k
// samples, format rate, and the reflection measurements of docs/grpo.md §7 (rate, accuracy of
// reflecting vs non-reflecting completions, lengths). The same prompts and seed give the same
// samples, so two checkpoints are compared on exactly the same draws.
import type { Sampler, TextGenerator } from '../model/sampler';
import type { Problem, Task } from '../tasks/types';
import {
  reflectionMarkers,
  reflectionSummary,
  thinkText,
  reflects,
  type ReflectionSummary,
} from '../rewards/reflection';
import { extractAnswer, formatOkAfterPrompt } from '../rewards/rewards';
import type { TrainerTokenizer } from '../grpo/trainer';
import type { Config } from '../grpo/config';

export interface EvalOptions {
  /** Samples per prompt for pass@k / cons@k (0 = greedy only). */
  k: number;
  temperature: number;
  topP?: number;
  topK?: number;
  /** TRL min_p (0 or absent = off). */
  minP?: number;
  /** TRL repetition_penalty (1 or absent = off). */
  repetitionPenalty?: number;
  maxCompletionLength: number;
  seed: number;
  /** Prompts decoded per generate() call (bounded GPU memory). */
  batchSize?: number;
  /** Also decode greedily (greedy_accuracy); the evaluations during training skip it to halve
   * their cost. Default true. */
  greedy?: boolean;
}

export interface EvalCompletion {
  text: string;
  correct: boolean | null;
  reflects: boolean;
  length: number;
}

export interface EvalItem {
  problem: Problem;
  prompt: string;
  /** Null when the evaluation ran without greedy decoding. */
  greedy: EvalCompletion | null;
  samples: EvalCompletion[];
  /** Some sample correct. */
  passAtK: boolean;
  /** The most frequent extracted answer (ties: first seen) is correct. */
  consAtK: boolean;
}

export interface EvalReport {
  prompts: number;
  k: number;
  metrics: {
    greedy_accuracy: number;
    greedy_format_rate: number;
    /** Mean accuracy of the k samples (what a training step's `accuracy` measures). */
    sample_accuracy: number;
    'pass@k': number;
    'cons@k': number;
    sample_format_rate: number;
    reflection_rate: number;
    accuracy_reflecting: number;
    accuracy_not_reflecting: number;
    length_reflecting: number;
    length_not_reflecting: number;
    mean_length: number;
  };
  reflection: ReflectionSummary;
  items: EvalItem[];
}

const withoutAnswer = ({
  text,
  correct,
  reflects,
  length,
}: EvalCompletion & { answer?: unknown }) => ({
  text,
  correct,
  reflects,
  length,
});

export interface EvalContext {
  sampler: TextGenerator;
  tokenizer: TrainerTokenizer;
  task: Task;
  renderPrompt(problem: Problem): { text: string; ids: number[] };
}

/** The evaluation context of a trainer's policy: its sampler and its prompt template, scored by
 * `task`. One definition for the run's evaluations during training, the CLI's held-out report,
 * the aha demo and the playground's Compare. */
export function trainerEvalContext(
  trainer: {
    readonly sampler: Sampler;
    renderPrompt(problem: Problem): { text: string; ids: number[] };
  },
  tokenizer: TrainerTokenizer,
  task: Task,
): EvalContext {
  return {
    sampler: trainer.sampler,
    tokenizer,
    task,
    renderPrompt: (p) => trainer.renderPrompt(p),
  };
}

/** Evaluates the sampler's current weights on `problems`. */
/** The run's sampling options as an evaluation uses them: `k` samples per prompt, `seed`. */
export function samplingEvalOptions(
  config: Pick<
    Config,
    'temperature' | 'topP' | 'topK' | 'minP' | 'repetitionPenalty' | 'maxCompletionLength'
  >,
  k: number,
  seed: number,
): EvalOptions {
  return {
    k,
    temperature: config.temperature,
    topP: config.topP,
    topK: config.topK,
    minP: config.minP ?? 0,
    repetitionPenalty: config.repetitionPenalty ?? 1,
    maxCompletionLength: config.maxCompletionLength,
    seed,
  };
}

export async function evaluate(
  ctx: EvalContext,
  problems: readonly Problem[],
  options: EvalOptions,
): Promise<EvalReport> {
  const { sampler, tokenizer, task } = ctx;
  const markers = reflectionMarkers(task.reflectionMarkers ?? []);
  const judge = (text: string, problem: Problem) => {
    const answer = extractAnswer(text);
    if (problem.verifier.kind === 'none') return { answer, correct: null };
    return { answer, correct: answer === null ? false : task.verify(answer, problem) };
  };
  const batchSize = options.batchSize ?? 16;
  const items: EvalItem[] = [];
  const decode = (ids: number[]) => tokenizer.decode(ids, { skipSpecialTokens: true });
  const completion = (ids: number[], problem: Problem) => {
    const text = decode(ids);
    return {
      text,
      ...judge(text, problem),
      reflects: reflects(thinkText(text), markers),
      length: ids.length,
    };
  };
  if (options.greedy === false && !(options.k > 0)) {
    throw new Error('evaluate: nothing to decode (greedy is off and k = 0)');
  }
  for (let start = 0; start < problems.length; start += batchSize) {
    const chunk = problems.slice(start, start + batchSize);
    const rendered = chunk.map((p) => ctx.renderPrompt(p));
    const common = {
      maxNewTokens: options.maxCompletionLength,
      temperature: options.temperature,
      topK: options.topK ?? 0,
      topP: options.topP ?? 1,
      minP: options.minP ?? 0,
      repetitionPenalty: options.repetitionPenalty ?? 1,
      seed: options.seed,
      eosTokenIds: tokenizer.eosTokenIds,
      padTokenId: tokenizer.padTokenId,
    };
    const greedy =
      options.greedy === false
        ? null
        : await sampler.generate(
            rendered.map((r) => r.ids),
            { ...common, greedy: true, stream: start },
          );
    const sampled =
      options.k > 0
        ? await sampler.generate(
            rendered.flatMap((r) => Array.from({ length: options.k }, () => r.ids)),
            { ...common, stream: 0x40000000 + start },
          )
        : null;
    chunk.forEach((problem, b) => {
      const samples = Array.from({ length: sampled ? options.k : 0 }, (_, j) =>
        completion(sampled!.completions[b * options.k + j], problem),
      );
      const votes = new Map<string, number>();
      for (const s of samples)
        if (s.answer !== null) votes.set(s.answer.trim(), (votes.get(s.answer.trim()) ?? 0) + 1);
      let majority: string | null = null;
      for (const [answer, count] of votes)
        if (majority === null || count > votes.get(majority)!) majority = answer;
      items.push({
        problem,
        prompt: rendered[b].text,
        greedy: greedy && withoutAnswer(completion(greedy.completions[b], problem)),
        samples: samples.map(withoutAnswer),
        passAtK: samples.some((s) => s.correct === true),
        consAtK: majority !== null && task.verify(majority, problem) === true,
      });
    });
  }
  const allSamples = items.flatMap((i) => i.samples);
  const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
  // Reflection is measured on the samples (the policy's behaviour), or on greedy when k = 0.
  const greedies = items.flatMap((i) => (i.greedy ? [i.greedy] : []));
  // Format is judged on the model's whole turn, as the trained format reward judged it: a chat
  // template's think markup at the prompt's end counts (docs/grpo.md §1, formatOkAfterPrompt).
  const formatted = (i: EvalItem, c: EvalCompletion) =>
    formatOkAfterPrompt(i.prompt, c.text) ? 1 : 0;
  const measured = allSamples.length ? allSamples : greedies;
  const reflection = reflectionSummary(
    measured.map((s) => ({ completion: s.text, correct: s.correct, length: s.length })),
    markers,
  );
  return {
    prompts: items.length,
    k: options.k,
    metrics: {
      greedy_accuracy: mean(greedies.map((g) => (g.correct ? 1 : 0))),
      greedy_format_rate: mean(items.flatMap((i) => (i.greedy ? [formatted(i, i.greedy)] : []))),
      sample_accuracy: mean(allSamples.map((s) => (s.correct ? 1 : 0))),
      'pass@k': mean(items.map((i) => (i.passAtK ? 1 : 0))),
      'cons@k': mean(items.map((i) => (i.consAtK ? 1 : 0))),
      sample_format_rate: mean(items.flatMap((i) => i.samples.map((s) => formatted(i, s)))),
      reflection_rate: reflection.reflectionRate,
      accuracy_reflecting: reflection.reflecting.accuracy,
      accuracy_not_reflecting: reflection.notReflecting.accuracy,
      length_reflecting: reflection.reflecting.meanLength,
      length_not_reflecting: reflection.notReflecting.meanLength,
      mean_length: mean(measured.map((s) => s.length)),
    },
    reflection,
    items,
  };
}
