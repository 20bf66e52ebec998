// The tiny reasoner's pretraining traces (src/tasks/traces.ts): format, verdicts and reflection
// flags agree with the project's reward code, every arithmetic step in a trace is true, the mix
// lands in the rates the model card promises, held-out problems never leak, and the tokenizer
// keeps prompts short and round-trips traces.
import { describe, expect, it } from 'vitest';
import { extractAnswer, formatOk } from '../../src/grpo/rewards';
import { reflectionMarkers, reflects, thinkText } from '../../src/grpo/reflection';
import { createTokenizer } from '../../src/io/tokenizer';
import { createArithmeticTask } from '../../src/tasks/arithmetic';
import { COUNTDOWN_REFLECTION_MARKERS, createCountdownTask } from '../../src/tasks/countdown';
import {
  candidateAnswer,
  completionTokenCount,
  countdownCandidates,
  countdownTrace,
  DEFAULT_TRACE_MIX,
  generateTraces,
  heldOutCountdownProblems,
  isHeldOut,
  problemKey,
  promptPhrases,
  tinyTokenizerFiles,
  TINY_COUNTDOWN_OPTIONS,
  type Trace,
} from '../../src/tasks/traces';
import { createTask } from '../../src/tasks/index';
import { createRng } from '../../src/tasks/rng';
import { verifyCountdown } from '../../src/tasks/verify';

const MARKERS = reflectionMarkers(COUNTDOWN_REFLECTION_MARKERS);
const countdown = createCountdownTask(TINY_COUNTDOWN_OPTIONS);

function evalStep(a: number, op: string, b: number): number {
  return op === '+' ? a + b : op === '-' ? a - b : op === '*' ? a * b : a / b;
}

describe('countdownCandidates', () => {
  it('every candidate evaluates, under the project verifier, to its stated value', () => {
    for (const nums of [
      [7, 6, 1],
      [10, 10, 2],
      [3, 3, 3],
      [9, 4, 8],
    ]) {
      const cands = countdownCandidates(nums);
      expect(cands.length).toBeGreaterThan(20);
      expect(new Set(cands.map(candidateAnswer)).size).toBe(cands.length);
      for (const k of cands) {
        expect(verifyCountdown(candidateAnswer(k), nums, k.value)).toMatchObject({ ok: true });
        expect(evalStep(k.a, k.op1, k.b)).toBe(k.x);
      }
    }
  });

  it('contains the generator’s solutions (so a careful search can find them)', () => {
    for (const p of countdown.generate(3, 50)) {
      if (p.verifier.kind !== 'countdown') throw new Error('countdown expected');
      const { nums, target } = p.verifier;
      expect(countdownCandidates(nums).some((k) => k.value === target)).toBe(true);
    }
  });
});

describe('traces', () => {
  const traces = generateTraces(11, 3000);

  it('are deterministic in the seed', () => {
    const again = generateTraces(11, 3000);
    expect(again.map((t) => t.completion)).toEqual(traces.map((t) => t.completion));
    const other = generateTraces(12, 3000);
    expect(other.map((t) => t.completion)).not.toEqual(traces.map((t) => t.completion));
  });

  it('have the reward format, and their verdicts and reflection flags match the reward code', () => {
    for (const t of traces) {
      expect(formatOk(t.completion), t.completion).toBe(true);
      const task = t.problem.task === 'countdown' ? countdown : createArithmeticTask();
      const answer = extractAnswer(t.completion);
      expect(answer).not.toBeNull();
      expect(task.verify(answer as string, t.problem) === true).toBe(t.correct);
      expect(reflects(thinkText(t.completion), MARKERS)).toBe(t.reflects);
    }
  });

  it('state only true arithmetic, and careful traces stop exactly at the first hit', () => {
    const stepRe = /(\d+) ([+\-*/]) (\d+) = (-?\d+)/g;
    for (const t of traces) {
      const steps = [...thinkText(t.completion).matchAll(stepRe)];
      expect(steps.length).toBe(t.style === 'drill' ? 1 : 2 * t.tries);
      for (const m of steps) expect(evalStep(+m[1], m[2], +m[3])).toBe(+m[4]);
      if (t.problem.verifier.kind !== 'countdown') continue;
      const target = t.problem.verifier.target;
      const results = steps.filter((_, i) => i % 2 === 1).map((m) => +m[4]);
      // Only the last try may hit; a careful trace that ends on a miss used all its tries, or its
      // next pick would not have fit (a try costs at most 26 tokens: ". wait 10 * 10 = 100,
      // 100 * 10 = 1000" and an answer up to 3 tokens longer).
      expect(results.slice(0, -1).every((r) => r !== target)).toBe(true);
      const tokens = completionTokenCount(t.completion);
      expect(tokens).toBeLessThanOrEqual(DEFAULT_TRACE_MIX.maxCompletionTokens);
      if (t.style === 'careful' && !t.correct && t.tries < DEFAULT_TRACE_MIX.maxTries) {
        expect(tokens, t.completion).toBeGreaterThan(DEFAULT_TRACE_MIX.maxCompletionTokens - 26);
      }
      if (t.style === 'sloppy') expect(t.tries).toBe(1);
    }
  });

  it('mix: reflection ≈ checkRate × first-try miss rate, and careful traces are right more often', () => {
    const cd = traces.filter((t) => t.problem.task === 'countdown');
    const rate = (xs: Trace[], f: (t: Trace) => boolean) => xs.filter(f).length / xs.length;
    const drills = traces.length - cd.length;
    expect(drills / traces.length).toBeCloseTo(DEFAULT_TRACE_MIX.arithmeticShare, 2);
    const careful = cd.filter((t) => t.style === 'careful');
    const sloppy = cd.filter((t) => t.style === 'sloppy');
    expect(careful.length / cd.length).toBeCloseTo(DEFAULT_TRACE_MIX.checkRate, 1);
    // A sloppy trace is one try, so its accuracy is the first-try hit rate.
    const firstTryHit = rate(sloppy, (t) => t.correct);
    expect(firstTryHit).toBeGreaterThan(0.1);
    expect(firstTryHit).toBeLessThan(0.35);
    // A careful trace aims more often (carefulAimRate > aimRate), so its first try hits more often;
    // it reflects exactly when that first try misses.
    const carefulFirstTryHit = rate(careful, (t) => !t.reflects);
    expect(carefulFirstTryHit).toBeGreaterThan(firstTryHit + 0.05);
    expect(
      Math.abs(
        rate(cd, (t) => t.reflects) - DEFAULT_TRACE_MIX.checkRate * (1 - carefulFirstTryHit),
      ),
    ).toBeLessThan(0.03);
    expect(rate(careful, (t) => t.correct)).toBeGreaterThan(1.8 * firstTryHit);
    expect(
      rate(
        cd.filter((t) => t.reflects),
        (t) => t.correct,
      ),
    ).toBeGreaterThan(
      rate(
        cd.filter((t) => !t.reflects),
        (t) => t.correct,
      ),
    );
  });

  it('a careful trace reflects with the marker between tries and answers its last candidate', () => {
    const [p] = countdown.generate(5, 1);
    const t = countdownTrace(countdown, p, createRng(2), true, 3);
    const think = thinkText(t.completion);
    expect(think.split('. wait ').length).toBe(t.tries);
    expect(t.completion.startsWith('<think>')).toBe(true);
  });

  it('aiming: the second step reaches the target whenever the first step allows it', () => {
    const problems = countdown.generate(21, 300);
    const stepRe = /^<think>(\d+) ([+\-*/]) (\d+) = /;
    let aimedRight = 0;
    let randomRight = 0;
    problems.forEach((p, i) => {
      if (p.verifier.kind !== 'countdown') throw new Error('countdown expected');
      const { nums, target } = p.verifier;
      const aimed = countdownTrace(countdown, p, createRng(i), false, 1, 1);
      const m = stepRe.exec(aimed.completion);
      expect(m).not.toBeNull();
      const [, a, op1, b] = m as RegExpExecArray;
      const reachable = countdownCandidates(nums).some(
        (k) => k.a === +a && k.op1 === op1 && k.b === +b && k.value === target,
      );
      expect(aimed.correct).toBe(reachable);
      aimedRight += aimed.correct ? 1 : 0;
      randomRight += countdownTrace(countdown, p, createRng(i), false, 1, 0).correct ? 1 : 0;
    });
    expect(aimedRight).toBeGreaterThan(2 * randomRight);
  });

  it('never contain held-out problems; the held-out set is distinct and about 10%', () => {
    expect(traces.some((t) => isHeldOut(t.problem))).toBe(false);
    const held = heldOutCountdownProblems(4, 256);
    expect(held).toHaveLength(256);
    expect(new Set(held.map(problemKey)).size).toBe(256);
    expect(held.every(isHeldOut)).toBe(true);
    const all = countdown.generate(9, 4000);
    const frac = all.filter(isHeldOut).length / all.length;
    expect(frac).toBeGreaterThan(0.06);
    expect(frac).toBeLessThan(0.14);
    // Key ignores the order of the numbers.
    const [q] = all;
    if (q.verifier.kind !== 'countdown') throw new Error('countdown expected');
    const swapped = { ...q, verifier: { ...q.verifier, nums: [...q.verifier.nums].reverse() } };
    expect(problemKey(swapped)).toBe(problemKey(q));
  });

  it("countdown's excludeHeldOut option drops exactly the held-out problems, prefix-stably", () => {
    const plain = createTask('countdown', TINY_COUNTDOWN_OPTIONS).generate(9, 400);
    const task = createTask('countdown', { ...TINY_COUNTDOWN_OPTIONS, excludeHeldOut: 1 });
    const kept = task.generate(9, 300);
    expect(kept).toHaveLength(300);
    expect(kept.some(isHeldOut)).toBe(false);
    // The plain stream minus its held-out problems, in order.
    const expected = plain.filter((p) => !isHeldOut(p)).slice(0, 300);
    expect(plain.some(isHeldOut)).toBe(true);
    expect(kept.map((p) => p.question)).toEqual(expected.map((p) => p.question));
    expect(task.generate(9, 10).map((p) => p.id)).toEqual(kept.slice(0, 10).map((p) => p.id));
  });
});

describe('tiny tokenizer', () => {
  it('keeps each fixed prompt span one token, prompts short, and round-trips traces', async () => {
    const files = tinyTokenizerFiles();
    const tok = await createTokenizer(files.tokenizerJson, files.tokenizerConfig);
    expect(tok.vocabSize).toBeLessThan(100);
    expect(tok.bosTokenId).toBe(1);
    expect(tok.eosTokenIds).toEqual([2]);
    expect(tok.padTokenId).toBe(0);
    for (const phrase of promptPhrases()) {
      expect(tok.encode(phrase, { addSpecialTokens: false }), phrase).toHaveLength(1);
    }
    const unk = tok.tokenToId('<unk>');
    for (const t of generateTraces(3, 200)) {
      const prompt = tok.encode(t.prompt);
      expect(prompt[0]).toBe(1);
      expect(prompt.length).toBeLessThanOrEqual(20);
      expect(tok.decode(prompt, { skipSpecialTokens: true })).toBe(t.prompt);
      const completion = tok.encode(t.completion, { addSpecialTokens: false });
      expect(completion).not.toContain(unk);
      // The generator's own count (which budgets a careful trace's tries) agrees, EOS added.
      expect(completionTokenCount(t.completion)).toBe(completion.length + 1);
      expect(completion.length + 1).toBeLessThanOrEqual(DEFAULT_TRACE_MIX.maxCompletionTokens);
      expect(tok.decode(completion)).toBe(t.completion);
    }
    // Hand-worked ids: digits come in pairs ("d", " d") after the added tokens.
    const digit = (d: number, space: boolean) =>
      tok.tokenToId(space ? ` ${d}` : String(d)) as number;
    expect(tok.encode('7 * 42', { addSpecialTokens: false })).toEqual([
      digit(7, false),
      tok.tokenToId(' *'),
      digit(4, true),
      digit(2, false),
    ]);
    expect(tok.tokenStrings(tok.encode('= 43. wait 7', { addSpecialTokens: false }))).toEqual([
      '=',
      ' 4',
      '3',
      '.',
      ' wait',
      ' 7',
    ]);
  });
});
