// Evaluation during training (evalSteps) and loadBestModelAtEnd on Node WebGPU with the tiny random
// model: evaluations leave the training steps unchanged, come at the configured steps, score the
// weights of their step, and the best one's weights are written back bit for bit.
import { describe, expect, it } from 'vitest';
import { EvalDuringTraining, evalSeed } from '../../src/train/eval-during-training';
import { evaluate, trainerEvalContext } from '../../src/train/evaluate';
import type { GrpoTrainer } from '../../src/grpo/trainer';
import type { Problem, Task } from '../../src/tasks/types';
import {
  algorithmic,
  echoTask,
  makeTrainer as makeTinyTrainer,
  startsWithA,
  tokenizer,
} from '../support/tiny-trainer';

const makeTrainer = (overrides: Parameters<typeof makeTinyTrainer>[0]) =>
  makeTinyTrainer(overrides, startsWithA, false, verifiedEcho);

// Distinct short prompts (the run's eval split must not repeat a training prompt), each with a
// reference answer: a completion is right when its <answer> is 'a'. The tiny model never writes the
// tags, so every evaluation scores 0 and the first one stays the best.
const letters = 'abcdefgh';
const verifiedEcho: Task = {
  ...echoTask,
  name: 'verified-echo',
  generate: (seed, count) =>
    Array.from({ length: count }, (_, i) => {
      const n = (seed % 1000) * 4096 + i;
      const question =
        [0, 3, 6, 9].map((shift) => letters[(n >> shift) & 7]).join('') +
        letters[(n >> 12) % 8] +
        '?';
      return {
        id: `verified-echo-${seed}-${i}`,
        task: 'verified-echo',
        question,
        reference: 'a',
        verifier: { kind: 'exact', answer: 'a' } as Problem['verifier'],
      };
    }),
  verify: (answer) => answer === 'a',
};

const contextOf = (trainer: GrpoTrainer) => trainerEvalContext(trainer, tokenizer, verifiedEcho);

const sameTensors = (a: Map<string, Float32Array>, b: Map<string, Float32Array>) =>
  [...a].every(([name, x]) => {
    const y = b.get(name)!;
    return x.length === y.length && x.every((v, i) => Object.is(v, y[i]));
  });

describe('evaluation during training', { timeout: 600_000 }, () => {
  it('leaves training unchanged, evaluates at every evalSteps and the last step, and loads the best weights', async () => {
    const options = {
      steps: 5,
      evalSteps: 2,
      evalPrompts: 3,
      evalGenerations: 2,
      maxCompletionLength: 3,
      loadBestModelAtEnd: true,
    };
    // Without evaluations: the reference training metrics.
    const plain = await makeTrainer({ ...options, evalSteps: 0, loadBestModelAtEnd: false });
    const expected = [];
    for (let s = 0; s < options.steps; s++) expected.push(algorithmic(await plain.trainStep()));
    plain.destroy();

    const trainer = await makeTrainer(options);
    const evals = new EvalDuringTraining(trainer, contextOf(trainer), trainer.config);
    expect(evals.enabled).toBe(true);
    const got = [];
    const weightsAt = new Map<number, Map<string, Float32Array>>();
    for (let s = 0; s < options.steps; s++) {
      const report = await trainer.trainStep();
      got.push(algorithmic(report));
      if (evals.due(report.step)) {
        weightsAt.set(report.step, await trainer.policy.readParameters());
        const record = await evals.run(report.step);
        // The record scores the weights of its step: an independent evaluation agrees.
        const again = await evaluate(contextOf(trainer), trainer.evalProblems, {
          k: 2,
          greedy: false,
          temperature: 1,
          maxCompletionLength: 3,
          seed: evalSeed(trainer.config),
        });
        expect(record.metrics.eval_mean_length).toBe(again.metrics.mean_length);
        expect(record.metrics.eval_accuracy).toBe(0);
      }
    }
    expect(got).toEqual(expected);
    expect(evals.history.map((e) => e.step)).toEqual([2, 4, 5]);
    for (const e of evals.history) {
      expect(e.metrics.eval_mean_length).toBeGreaterThan(0);
      expect(e.metrics.eval_mean_length).toBeLessThanOrEqual(3);
      expect(e.metrics.eval_reflection_rate).toBe(0);
    }
    // Equal scores: the first evaluation stays the best, and its weights come back exactly.
    expect(evals.best).toEqual({ step: 2, evalAccuracy: 0 });
    const last = await trainer.policy.readParameters();
    expect(sameTensors(last, weightsAt.get(2)!)).toBe(false);
    expect(evals.loadBest()?.best).toEqual({ step: 2, evalAccuracy: 0 });
    expect(sameTensors(await trainer.policy.readParameters(), weightsAt.get(2)!)).toBe(true);
    // Only the weights: the run still reports its last step.
    expect(trainer.step).toBe(5);
    trainer.destroy();
  });

  it('does nothing when evalSteps is 0, and keeps the last weights when loadBestModelAtEnd is off', async () => {
    const off = await makeTrainer({ steps: 2, evalSteps: 0, evalPrompts: 3 });
    const none = new EvalDuringTraining(off, contextOf(off), off.config);
    expect(none.enabled).toBe(false);
    expect([1, 2].map((s) => none.due(s))).toEqual([false, false]);
    off.destroy();

    const trainer = await makeTrainer({ steps: 2, evalSteps: 1, evalPrompts: 3 });
    const evals = new EvalDuringTraining(trainer, contextOf(trainer), trainer.config);
    for (let s = 0; s < 2; s++) {
      const report = await trainer.trainStep();
      if (evals.due(report.step)) await evals.run(report.step);
    }
    const last = await trainer.policy.readParameters();
    expect(evals.history.map((e) => e.step)).toEqual([1, 2]);
    expect(evals.best?.step).toBe(1);
    expect(evals.loadBest()).toBeNull();
    expect(sameTensors(await trainer.policy.readParameters(), last)).toBe(true);
    trainer.destroy();
  });
});
