// How long one GRPO step of a config will take on this device, before any step has run: the
// first-run screen shows it before its first click (src/app/components/FirstRun.svelte). The
// worker times this device with the step's own shapes (src/worker/warmup.ts): a model of the same
// config with random weights decodes the step's B·G sequences (the compile of its pipelines, the
// time per token), and the model's matrix products run on a block of rows (the
// forward's throughput). This file scales those measurements to a step by the step's structure:
//   sampling ≈ T × the warm-up's time per token × SAMPLING_OVERHEAD
//   update   ≈ forward-equivalents × the forward over B·G·(P + T) rows × UPDATE_OVERHEAD, where
//              one policy pass is forward + backward ≈ 3 forwards (per μ), plus the reference
//              forward (β > 0) and the re-scoring forward after the update
//   step 1   + the pipelines the warm-up did not compile (backward, loss, optimizer):
//              FIRST_STEP_COMPILE × the warm-up's compile time
// The estimate is shown as a range (÷ / × ESTIMATE_SPREAD): completions often stop before T
// tokens, and the factors were measured on one machine (a real GPU will differ: the page says the
// estimate is replaced by the measured time after step 1). After step 1 the page shows the
// measured time instead.
/** The parts of a config the estimate reads. */
export interface StepShape {
  perStepPrompts: number; // B
  numGenerations: number; // G
  maxPromptLength: number; // P (an upper bound on the prompt's tokens)
  maxCompletionLength: number; // T
  numIterations: number; // μ
  beta: number;
}

/** The warm-up's sampling measurements (worker/warmup.ts timeSampling). */
export interface SamplingTiming {
  /** Building the model and its first call: the forward's and the sampler's pipelines compile. */
  compileMs: number;
  /** Mean time per token of calls of `tokens` tokens (prefill included) on `rows` prompts of
   * `promptTokens`. */
  tokenMs: number;
  tokens: number;
  rows: number;
  promptTokens: number;
}

/** What the warm-up measured on this device (worker/warmup.ts timeDevice). */
export interface DeviceTiming {
  sampling: SamplingTiming;
  /** Every matmul of the model at `blockRows` rows (ms): the forward's throughput. */
  blockMs: number;
  blockRows: number;
}

/** A step's time as a range, in milliseconds; `firstMs` adds what only step 1 pays. */
export interface StepEstimate {
  lowMs: number;
  ms: number;
  highMs: number;
  samplingMs: number;
  updateMs: number;
  /** Step 1 (its range: lowMs … highMs scaled alike). */
  firstMs: number;
}

/**
 * Calibration, measured in Debian's Chromium on SwiftShader (2 CPU cores shared with other work,
 * load average 13–21), the bundled tiny-reasoner and the playground's defaults (2 prompts × 4
 * answers, 80 tokens; tests/e2e/first-run.spec.ts logs each run's numbers). One run: the warm-up
 * measured 2.8 s compile, 66 ms per token and 148 ms for the matmuls at 256 rows; its update
 * (backward, optimizer, re-scoring) took 9.2 s against 9.1 s predicted with UPDATE_OVERHEAD
 * (norms, attention, loss, AdamW and the per-pass submissions besides the matmuls).
 * Sampling once cost 4.8 × the warm-up's tokens (SAMPLING_OVERHEAD was 5) and step 1 paid 5–10 ×
 * the warm-up's compile (FIRST_STEP_COMPILE was 7) while every decoded token was its own
 * submission, waited for and repainted. Decoding now submits 8 tokens at a time with one wait
 * (the warm-up decodes the same way) and the update's passes go out without waits: in a clean CI
 * run (idle 2 cores) the warm-up measured 1.6 s compile, 26 ms a token and 120 ms of matmuls, and
 * step 1 took 8.8 s, 0.30 × the old constants' 29 s. SAMPLING_OVERHEAD 1.5 (the page repaints once
 * per submission) and FIRST_STEP_COMPILE 3 predict 15.3 s for it (0.58 ×), inside the range shown.
 */
export const SAMPLING_OVERHEAD = 1.5;
export const UPDATE_OVERHEAD = 3.4;
export const FIRST_STEP_COMPILE = 3;
/** The range shown: the estimate divided / multiplied by this. */
export const ESTIMATE_SPREAD = 2;

/** The number of forward passes over the step's sequences that the update costs. */
export function forwardEquivalents(shape: StepShape): number {
  return 3 * shape.numIterations + (shape.beta > 0 ? 1 : 0) + 1;
}

export function estimateStep(timing: DeviceTiming, shape: StepShape): StepEstimate {
  const N = shape.perStepPrompts * shape.numGenerations;
  const T = shape.maxCompletionLength;
  const sampling = timing.sampling;
  // Decode time per token grows with the rows once they fill the device; below the rows the
  // warm-up measured it barely changes (dispatch-bound), so it is scaled up, never down.
  const rowScale = Math.max(1, N / sampling.rows);
  const samplingMs = rowScale * T * sampling.tokenMs * SAMPLING_OVERHEAD;
  const rows = N * (shape.maxPromptLength + T);
  const forwardMs = timing.blockMs * (rows / timing.blockRows);
  const updateMs = forwardEquivalents(shape) * forwardMs * UPDATE_OVERHEAD;
  const ms = samplingMs + updateMs;
  const firstMs = ms + FIRST_STEP_COMPILE * sampling.compileMs;
  return {
    lowMs: ms / ESTIMATE_SPREAD,
    ms,
    highMs: ms * ESTIMATE_SPREAD,
    samplingMs,
    updateMs,
    firstMs,
  };
}
