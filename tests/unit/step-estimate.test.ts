// The step-time estimate from the warm-up's measurements, against hand-worked numbers:
// B = 2, G = 4 (N = 8 rows, as measured), P = 64, T = 80, μ = 1, β = 0, the warm-up 1000 ms
// compile, 10 ms per token, 200 ms for the matmuls at 256 rows:
//   sampling = 80 · 10 · SAMPLING_OVERHEAD 1.5 = 1200
//   update   = (3·1 + 0 + 1) forwards · 200 · (8 · 144 / 256 = 4.5) · UPDATE_OVERHEAD 3.4 = 12240
//   step = 13440, step 1 = 13440 + FIRST_STEP_COMPILE 3 · 1000 = 16440, range ÷/× 2
import { describe, expect, it } from 'vitest';
import {
  estimateStep,
  forwardEquivalents,
  type DeviceTiming,
  type StepShape,
} from '../../src/grpo/step-estimate';

const TIMING: DeviceTiming = {
  sampling: { compileMs: 1000, tokenMs: 10, tokens: 24, rows: 8, promptTokens: 64 },
  blockMs: 200,
  blockRows: 256,
};
const SHAPE: StepShape = {
  perStepPrompts: 2,
  numGenerations: 4,
  maxPromptLength: 64,
  maxCompletionLength: 80,
  numIterations: 1,
  beta: 0,
};

describe('estimateStep', () => {
  it('scales the warm-up to a step of the playground defaults', () => {
    const e = estimateStep(TIMING, SHAPE);
    expect(e.samplingMs).toBeCloseTo(1200, 6);
    expect(e.updateMs).toBeCloseTo(12240, 6);
    expect(e.ms).toBeCloseTo(13440, 6);
    expect(e.firstMs).toBeCloseTo(16440, 6);
    expect(e.lowMs).toBeCloseTo(6720, 6);
    expect(e.highMs).toBeCloseTo(26880, 6);
  });

  it('counts the forwards of the update: 3 per pass, the reference with β > 0, the re-scoring', () => {
    expect(forwardEquivalents(SHAPE)).toBe(4);
    expect(forwardEquivalents({ ...SHAPE, numIterations: 2, beta: 0.04 })).toBe(8);
  });

  it('more rows than measured scale sampling up; fewer never scale it down', () => {
    // N = 16: twice the measured rows, twice the sampling; the update's rows double too.
    const big = estimateStep(TIMING, { ...SHAPE, perStepPrompts: 4 });
    expect(big.samplingMs).toBeCloseTo(2400, 6);
    expect(big.updateMs).toBeCloseTo(24480, 6);
    // N = 2: dispatch-bound decode costs what it cost at 8 rows; the update scales with rows.
    const small = estimateStep(TIMING, { ...SHAPE, perStepPrompts: 1, numGenerations: 2 });
    expect(small.samplingMs).toBeCloseTo(1200, 6);
    expect(small.updateMs).toBeCloseTo(12240 / 4, 6);
  });
});
