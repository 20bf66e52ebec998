// The sub-progress of a training step, for the page's progress line ("sampling 23/80 tokens"). The
// trainer says when a step enters sampling, rewards and the update (GrpoTrainer.onPhase); the GPU
// submissions it makes in between carry labels (engine.run's label: 'prefill' and one 'decode' per
// sampled token, 'reference', 'zero-grad' and 'policy' per pass, 'optimizer', 'logp-after-update'),
// which refine that into tokens sampled and the parts of the update, so the training code needs no
// knowledge of the page. A label this does not know changes nothing: the phase stays as it was.
import type { PhaseProgress, StepPhase } from './protocol';

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

  /** A labelled GPU submission (engine.run) made while a phase is under way. */
  gpuWork(label: string | undefined) {
    const phase = this.#phase;
    if (phase === 'sampling') {
      if (label === 'prefill' || label === 'decode')
        this.#tokens = Math.min(this.#tokens + 1, this.#maxTokens);
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
