// The sub-progress of a training step, which grpo's Run reports through its onProgress hook (the
// page's progress line "sampling 23/80 tokens", the command line's status line). The trainer says
// when a step enters sampling, rewards and the update (GrpoTrainer.onPhase); the GPU submissions it
// makes in between carry labels (engine.run's label: 'prefill' or 'decode' with the tokens it draws,
// 'reference', 'zero-grad' and 'policy' per pass, 'optimizer', 'logp-after-update'), which refine
// that into tokens sampled and the parts of the update, so the training code needs no knowledge of
// who listens. A label this does not know changes nothing: the phase stays as it was.

/**
 * What a training step is doing right now, in the order a step does it: sampling the group's
 * tokens, scoring rewards, the reference policy's log-probs (β > 0), forward + backward of each
 * of the μ passes, clip + AdamW, re-scoring the updated policy (the Learn view's "after" log-probs),
 * then the automatic checkpoint and evaluation that may follow the step.
 */
export type StepPhase =
  | 'sampling'
  | 'rewards'
  | 'reference'
  | 'backward'
  | 'optimizer'
  | 'rescoring'
  | 'checkpoint'
  | 'eval';

/** A step's phase; `done` / `total` count tokens while sampling and passes (μ) while updating. */
export interface PhaseProgress {
  /** The step this work belongs to (1-based: the step being trained, or just trained). */
  step: number;
  phase: StepPhase;
  done: number | null;
  total: number | null;
}

/** What the trainer reports itself (src/grpo/trainer.ts GrpoTrainer.onPhase). */
export type TrainerPhase = 'sampling' | 'rewards' | 'update';

/** The phases of the update, which GPU labels refine. */
const UPDATE_PHASES: ReadonlySet<StepPhase> = new Set([
  'reference',
  'backward',
  'optimizer',
  'rescoring',
]);

export class StepProgress {
  #step = 0;
  #phase: StepPhase | null = null;
  #tokens = 0;
  #maxTokens = 0;
  #pass = 0;
  #passes = 1;
  #last: PhaseProgress | null = null;

  constructor(private readonly emit: (progress: PhaseProgress | null) => void) {}

  /** The progress last emitted (null between steps). */
  get current(): PhaseProgress | null {
    return this.#last;
  }

  /** The trainer entered a phase of `step` (1-based). */
  trainer(
    phase: TrainerPhase,
    step: number,
    limits: { maxCompletionLength: number; numIterations: number; beta: number },
  ) {
    this.#step = step;
    if (phase === 'sampling') {
      this.#tokens = 0;
      this.#maxTokens = limits.maxCompletionLength;
      this.#phase = 'sampling';
    } else if (phase === 'rewards') {
      this.#phase = 'rewards';
    } else {
      this.#pass = 0;
      this.#passes = limits.numIterations;
      // With β > 0 the update starts with the reference log-probs.
      this.#phase = limits.beta > 0 ? 'reference' : 'backward';
    }
    this.#publish();
  }

  /** The work that may follow a step: its automatic checkpoint, its evaluation. */
  after(step: number, phase: 'checkpoint' | 'eval') {
    this.#step = step;
    this.#phase = phase;
    this.#publish();
  }

  /** Nothing under way (between steps, or the step ended or failed). */
  idle() {
    this.#phase = null;
    this.#publish();
  }

  /**
   * A labelled GPU submission (engine.run) made while a phase is under way; `count` is how many
   * units it holds (RunOptions.count: a sampling submission's decode steps).
   */
  gpuWork(label: string | undefined, count = 1) {
    const phase = this.#phase;
    if (phase === 'sampling') {
      if (label === 'prefill' || label === 'decode')
        this.#tokens = Math.min(this.#tokens + count, this.#maxTokens);
    } else if (phase !== null && UPDATE_PHASES.has(phase)) {
      if (label === 'reference') this.#phase = 'reference';
      else if (label === 'zero-grad') {
        this.#pass = Math.min(this.#pass + 1, this.#passes);
        this.#phase = 'backward';
      } else if (label === 'policy') this.#phase = 'backward';
      else if (label === 'optimizer') this.#phase = 'optimizer';
      else if (label === 'logp-after-update') this.#phase = 'rescoring';
    }
    // Rewards, checkpoint and eval: their GPU work (eval samples too) stays in that phase.
    this.#publish();
  }

  #publish() {
    const next = this.#progress();
    const last = this.#last;
    if (
      next === last ||
      (next &&
        last &&
        next.step === last.step &&
        next.phase === last.phase &&
        next.done === last.done &&
        next.total === last.total)
    )
      return;
    this.#last = next;
    this.emit(next);
  }

  #progress(): PhaseProgress | null {
    const phase = this.#phase;
    if (phase === null) return null;
    const step = this.#step;
    if (phase === 'sampling') return { step, phase, done: this.#tokens, total: this.#maxTokens };
    if (phase === 'backward' || phase === 'optimizer')
      return { step, phase, done: Math.max(this.#pass, 1), total: this.#passes };
    return { step, phase, done: null, total: null };
  }
}

/** The phase of a step in a few words ("sampling 23/80 tokens", "forward + backward, pass 1/2"). */
export function phaseText(p: Pick<PhaseProgress, 'phase' | 'done' | 'total'>): string {
  const of = p.done !== null && p.total !== null ? ` ${p.done}/${p.total}` : '';
  switch (p.phase) {
    case 'sampling':
      return `sampling${of} tokens`;
    case 'rewards':
      return 'scoring rewards';
    case 'reference':
      return 'reference log-probs';
    case 'backward':
      // μ = 1: one pass, nothing to count.
      return p.total !== null && p.total > 1
        ? `forward + backward, pass${of}`
        : 'forward + backward';
    case 'optimizer':
      return p.total !== null && p.total > 1 ? `optimizer step${of}` : 'optimizer step';
    case 'rescoring':
      return 'scoring the updated policy';
    case 'checkpoint':
      return 'saving the checkpoint';
    case 'eval':
      return 'evaluating';
  }
}

/** The fraction of the phase done, for a meter (sampling, and μ > 1 passes), or null: one pass of
 * one has nothing to count, and a full meter would say the update is over. */
export function phaseFraction(p: Pick<PhaseProgress, 'done' | 'total'>): number | null {
  if (p.done === null || p.total === null || p.total <= 1) return null;
  return Math.min(1, Math.max(0, p.done / p.total));
}
