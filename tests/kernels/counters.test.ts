// The engine's counters (src/engine/counters.ts) pinned for one GRPO step of a tiny model, phase by
// phase: submits, CPU waits on the GPU and dispatches are deterministic, so a change that adds a
// round trip (a wait per token, a readback per tensor) or dispatches fails here. The step: full
// fine-tune with β > 0 (a reference model), 2 micro-batches, 8 sequences of 20 tokens with no EOS
// (every sequence runs to the end, whatever the kernels' rounding), then a checkpoint snapshot.
// Kernel variants are fixed (barrier-free, as SwiftShader picks), since they decide the dispatches.
import { describe, expect, it } from 'vitest';
import {
  COUNTER_PHASES,
  type CounterSnapshot,
  diffCounts,
  diffTimes,
} from '../../src/engine/counters';
import { GrpoTrainer, type TrainerTokenizer } from '../../src/grpo/trainer';
import { initLlamaWeights } from '../../src/model/init';
import { config, echoTask, modelConfig, startsWithA, tokenizer } from '../support/tiny-trainer';
import { BARRIER_VARIANTS, testEngineWith } from './harness';

/** The tiny trainer's tokenizer without an EOS id, so sampling always draws maxCompletionLength. */
const noEos: TrainerTokenizer = {
  eosTokenIds: [],
  padTokenId: tokenizer.padTokenId,
  encode: (text) => tokenizer.encode(text),
  decode: (ids, options) => tokenizer.decode(ids, options),
};

const DECODE_STEPS = 20;

/**
 * Per phase. sampling: the prefill, then 20 decode steps in submissions of up to 8 (one wait
 * each, which also reads the new tokens back); reference: one submission per micro-batch, no
 * wait; update: zero-grad and one per micro-batch, no wait; optimizer: clip + AdamW with every
 * statistic read back, the pass's one wait; checkpoint: one batched readback for the weights
 * and one for each AdamW moment. Before batching (commit 48dd88a, this step counted the same
 * way), submits / waits were: sampling 24 / 24, reference 3 / 3, update 5 / 5, optimizer 3 / 3,
 * checkpoint 63 / 63 (one per tensor), with the same dispatches.
 *
 * buffers: device.createBuffer calls (storage scratch and activations, readback staging, the
 * uniform arena's chunks on first use); bindGroups: one per dispatch. Before the uniform arena
 * (uniform-arena.ts) every dispatch also made its own uniform buffer: sampling 824, reference 109,
 * update 254, optimizer 45 buffers.
 */
const PINNED = {
  sampling: { submits: 4, waits: 3, dispatches: 760, buffers: 66, bindGroups: 760 },
  rewards: { submits: 0, waits: 0, dispatches: 0, buffers: 0, bindGroups: 0 },
  reference: { submits: 2, waits: 0, dispatches: 68, buffers: 41, bindGroups: 68 },
  update: { submits: 3, waits: 0, dispatches: 176, buffers: 82, bindGroups: 176 },
  optimizer: { submits: 1, waits: 1, dispatches: 43, buffers: 2, bindGroups: 43 },
  checkpoint: { submits: 3, waits: 3, dispatches: 0, buffers: 3, bindGroups: 0 },
  other: { submits: 0, waits: 0, dispatches: 0, buffers: 0, bindGroups: 0 },
};

describe('engine counters of a GRPO step', { timeout: 300_000 }, () => {
  it('submits, waits and dispatches per phase are what they were pinned to', async () => {
    const engine = await testEngineWith(BARRIER_VARIANTS[1].tuning);
    const trainer = new GrpoTrainer({
      engine,
      config: config({
        perStepPrompts: 2,
        numGenerations: 4,
        maxCompletionLength: DECODE_STEPS,
        beta: 0.04,
        gradientAccumulationSteps: 2,
      }),
      modelConfig,
      weights: initLlamaWeights(modelConfig, 1),
      tokenizer: noEos,
      task: echoTask,
      rewardFunctions: [startsWithA],
    });
    try {
      const before = engine.counters.snapshot();
      const timesBefore = engine.counters.timeSnapshot();
      const started = performance.now();
      const report = await trainer.trainStep();
      await trainer.snapshot();
      const elapsed = performance.now() - started;
      const counts: CounterSnapshot = diffCounts(engine.counters.snapshot(), before);
      const times = diffTimes(engine.counters.timeSnapshot(), timesBefore);
      expect(report.groups.flatMap((g) => g.completions.map((c) => c.tokens.length))).toEqual(
        Array(8).fill(DECODE_STEPS),
      );
      const pinned = Object.fromEntries(
        COUNTER_PHASES.map((p) => [
          p,
          {
            submits: counts[p].submits,
            waits: counts[p].waits,
            dispatches: counts[p].dispatches,
            buffers: counts[p].buffers,
            bindGroups: counts[p].bindGroups,
          },
        ]),
      );
      expect(pinned).toEqual(PINNED);
      // The targets of issue 34: at most one CPU wait per 8 decoded tokens, none between the
      // update's micro-batches (one per pass, for its statistics).
      expect(counts.sampling.waits).toBeLessThanOrEqual(Math.ceil(DECODE_STEPS / 8));
      expect(counts.reference.waits + counts.update.waits + counts.optimizer.waits).toBe(1);
      // Phase times: the phases' wall times partition the step (with the checkpoint after it); a
      // phase that waited spent part of its wall time waiting, and one that never waited none.
      const wallSum = COUNTER_PHASES.reduce((sum, p) => sum + times[p].wallMs, 0);
      expect(Math.abs(wallSum - elapsed)).toBeLessThan(0.01 * elapsed + 5);
      for (const p of COUNTER_PHASES) {
        expect(times[p].waitMs).toBeGreaterThanOrEqual(0);
        expect(times[p].waitMs).toBeLessThanOrEqual(times[p].wallMs + 1);
        if (counts[p].waits === 0) expect(times[p].waitMs).toBe(0);
      }
      expect(times.sampling.waitMs).toBeGreaterThan(0);
    } finally {
      trainer.destroy();
    }
  });
});
