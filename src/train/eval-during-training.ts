// Evaluation during training (TRL's eval_strategy="steps" + load_best_model_at_end): every
// `evalSteps` steps and after the last one, the policy samples `evalGenerations` completions for
// each of the run's eval prompts (the eval split: disjoint from its training prompts); their mean
// accuracy is the step's eval accuracy. With `loadBestModelAtEnd` the weights of the best evaluation
// are kept (a CPU copy) and written back after the last step, so the run ends on the checkpoint
// that held-out-style data preferred rather than wherever the last update left the policy. A LoRA
// run keeps and restores its adapters: they are all that training changes.
//
// Sampling is keyed by (seed, stream) and never touches the training draws, so a run with
// evaluation takes exactly the same training steps as one without.
import type { Config } from '../grpo/config';
import { evaluate, samplingEvalOptions, type EvalContext, type EvalReport } from './evaluate';
import { mixSeeds } from '../core/rng';
import type { GrpoTrainer } from '../grpo/trainer';

/** One evaluation during training, as logged (TRL prefixes eval metrics with "eval_"). */
export interface EvalRecord {
  step: number;
  metrics: {
    eval_accuracy: number;
    eval_format_rate: number;
    eval_reflection_rate: number;
    eval_mean_length: number;
    eval_time: number;
  };
}

/** The evaluation that scored best so far (first of equals: a later tie does not replace it). */
export interface BestEval {
  step: number;
  evalAccuracy: number;
}

/** The sampling seed of these evaluations: the same draws at every evaluation of a run (checkpoints
 * are compared on equal terms), apart from the run's training draws. */
export const evalSeed = (config: Pick<Config, 'seed'>) => mixSeeds(config.seed, 0x6576616c); // "eval"

export class EvalDuringTraining {
  readonly history: EvalRecord[] = [];
  private bestRecord: BestEval | null = null;
  private bestWeights: Map<string, Float32Array> | null = null;

  constructor(
    private readonly trainer: GrpoTrainer,
    private readonly context: EvalContext,
    /** The run's config in force (Run.applyLiveOptions replaces it: evalSteps, steps, sampling). */
    public config: Config,
  ) {}

  /** Whether the configuration asks for evaluations at all (evalSteps > 0 and eval prompts). */
  get enabled(): boolean {
    return this.config.evalSteps > 0 && this.trainer.evalProblems.length > 0;
  }

  /** Whether the step just completed is due for an evaluation. */
  due(step: number): boolean {
    if (!this.enabled) return false;
    return step % this.config.evalSteps === 0 || step === this.config.steps;
  }

  get best(): BestEval | null {
    return this.bestRecord;
  }

  /** Evaluates the current weights (after `step` steps) and remembers them when they are the best. */
  async run(step: number): Promise<EvalRecord> {
    const started = performance.now();
    const report: EvalReport = await evaluate(this.context, this.trainer.evalProblems, {
      ...samplingEvalOptions(this.config, this.config.evalGenerations, evalSeed(this.config)),
      greedy: false,
    });
    const m = report.metrics;
    const record: EvalRecord = {
      step,
      metrics: {
        eval_accuracy: m.sample_accuracy,
        eval_format_rate: m.sample_format_rate,
        eval_reflection_rate: m.reflection_rate,
        eval_mean_length: m.mean_length,
        eval_time: (performance.now() - started) / 1000,
      },
    };
    this.history.push(record);
    if (this.bestRecord === null || m.sample_accuracy > this.bestRecord.evalAccuracy) {
      this.bestRecord = { step, evalAccuracy: m.sample_accuracy };
      if (this.config.loadBestModelAtEnd) {
        const policy = this.trainer.policy;
        this.bestWeights = policy.lora
          ? await policy.readAdapters()
          : await policy.readParameters();
      }
    }
    return record;
  }

  /**
   * Writes the best evaluation's weights back into the policy (loadBestModelAtEnd). Returns the
   * evaluation loaded with its weights (the CPU copy: no need to read them back from the GPU), or
   * null when there is nothing to load (option off, or no evaluation yet). Only the weights change:
   * the step count and optimizer state stay those of the last step. A LoRA run's weights are its
   * adapters (PEFT names).
   */
  loadBest(): { best: BestEval; weights: Map<string, Float32Array> } | null {
    if (!this.config.loadBestModelAtEnd || !this.bestWeights || !this.bestRecord) return null;
    const policy = this.trainer.policy;
    if (policy.lora) policy.writeAdapters(this.bestWeights);
    else policy.writeParameters(this.bestWeights);
    return { best: this.bestRecord, weights: this.bestWeights };
  }
}
