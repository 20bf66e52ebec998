// Training problems drawn as a run needs them (src/tasks/index.ts trainEvalStream): the same
// training and held-out problems as when every step's problems were built up front, for the
// same seed, and a run of a million steps starts without building millions of problems.
import { describe, expect, it } from 'vitest';
import { mixSeeds } from '../../src/core/rng';
import { PRESETS } from '../../src/grpo/presets';
import {
  createTask,
  EVAL_SEED_SALT,
  TRAIN_LOOKAHEAD,
  trainEvalProblems,
  trainEvalStream,
  type Problem,
  type Task,
} from '../../src/tasks/index';

/** The split as it was computed before streams, every training problem up front (verbatim). */
function upFront(task: Task, seed: number, trainCount: number, evalCount: number) {
  if (task.splits) return task.splits(seed, trainCount, evalCount);
  const train = task.generate(seed, trainCount);
  const seen = new Set(train.map((p) => p.question));
  const candidates = task.generate(mixSeeds(seed, EVAL_SEED_SALT), evalCount * 2 + 8);
  const evalProblems = candidates.filter((p) => !seen.has(p.question)).slice(0, evalCount);
  return { train, eval: evalProblems };
}

const JSONL = Array.from(
  { length: 40 },
  (_, i) => `{"prompt": "What is ${i} + ${i}?", "answer": "${2 * i}"}`,
).join('\n');

const TASKS: [string, () => Task][] = [
  ['countdown', () => createTask('countdown')],
  ['arithmetic', () => createTask('arithmetic', { digits: 1 })],
  ["the aha preset's countdown", () => createTask('countdown', PRESETS.aha.taskOptions)],
  ['jsonl', () => createTask('jsonl', { path: 'd.jsonl' }, { text: JSONL })],
];
const ids = (ps: readonly Problem[]) => ps.map((p) => `${p.id} ${p.question}`);

describe('training problems drawn per step', () => {
  for (const [name, make] of TASKS) {
    it(`${name}: the same training and held-out problems as built up front`, () => {
      // The default run (200 steps × 4 prompts) and the aha preset's (95 × 2), with 32 held out.
      for (const [seed, count] of [
        [42, 800],
        [1, 190],
      ]) {
        const before = upFront(make(), seed, count, 32);
        const stream = trainEvalStream(make(), seed, count, 32);
        expect(stream.train.length).toBe(count);
        expect(ids(Array.from({ length: count }, (_, i) => stream.train.at(i)))).toEqual(
          ids(before.train),
        );
        expect(ids(stream.eval)).toEqual(ids(before.eval));
        expect(ids(trainEvalProblems(make(), seed, count, 32).train)).toEqual(ids(before.train));
      }
    });
  }

  it('a million steps: the first steps come at once and are the ones a short run trains on', () => {
    const task = createTask('countdown');
    const started = performance.now();
    const stream = trainEvalStream(task, 42, 1_000_000 * 4, 32);
    const first = Array.from({ length: 12 }, (_, i) => stream.train.at(i));
    // Building 4 million problems up front took minutes and gigabytes; the lookahead is bounded.
    expect(performance.now() - started).toBeLessThan(15_000);
    expect(ids(first)).toEqual(ids(upFront(task, 42, 12, 0).train));
    expect(stream.train.length).toBe(4_000_000);
    expect(stream.eval).toHaveLength(32);
  });

  it('past the lookahead the stream continues the same draws, held-out questions left out', () => {
    // A task whose training draws repeat held-out questions only after the lookahead.
    const SEED = 7;
    const question = (seed: number, i: number) =>
      seed !== SEED
        ? `e${i}`
        : i >= TRAIN_LOOKAHEAD && i % 10 === 0
          ? `e${(i / 10) % 20}`
          : `t${i}`;
    const problem = (seed: number, i: number): Problem => ({
      id: `fake-${seed}-${i}`,
      task: 'fake',
      question: question(seed, i),
      reference: null,
      verifier: { kind: 'none' },
    });
    const base = createTask('arithmetic');
    const task: Task = {
      ...base,
      generate: (seed, count) => Array.from({ length: count }, (_, i) => problem(seed, i)),
    };
    const count = TRAIN_LOOKAHEAD + 4000;
    const stream = trainEvalStream(task, SEED, count, 16);
    expect(stream.eval.map((p) => p.question)).toEqual(
      Array.from({ length: 16 }, (_, i) => `e${i}`),
    );
    const held = new Set(stream.eval.map((p) => p.question));
    const raw = task.generate(SEED, count + 1000);
    const expected = [
      ...raw.slice(0, TRAIN_LOOKAHEAD),
      ...raw.slice(TRAIN_LOOKAHEAD).filter((p) => !held.has(p.question)),
    ].slice(0, count);
    const got = Array.from({ length: count }, (_, i) => stream.train.at(i));
    expect(ids(got)).toEqual(ids(expected));
    // Some later draws were held-out questions (e16…e19 are not held out and stay).
    expect(raw.slice(TRAIN_LOOKAHEAD, count).filter((p) => held.has(p.question)).length).toBe(320);
    expect(got.some((p) => held.has(p.question))).toBe(false);
  });
});
