// The tiny reasoner's pretraining traces (src/tasks/traces.ts): format, verdicts and reflection
// flags agree with the project's reward code, every arithmetic step in a trace is true, the mix
// lands in the rates the model card promises, held-out problems never leak, and the tokenizer
// keeps prompts short and round-trips traces.
import { describe, expect, it } from 'vitest';
import { extractAnswer, formatOk } from '../../src/rewards/rewards';
import { reflectionMarkers, reflects, thinkText } from '../../src/rewards/reflection';
import { createTokenizer } from '../../src/formats/tokenizer';
import { createArithmeticTask } from '../../src/tasks/arithmetic';
import { COUNTDOWN_REFLECTION_MARKERS, createCountdownTask } from '../../src/tasks/countdown';
import {
  BACKWARD_WORD,
  backwardCountdownTrace,
  backwardLastSteps,
  backwardTryAnswer,
  backwardTrySteps,
  candidateAnswer,
  completionTokenCount,
  countdownCandidates,
  countdownTrace,
  ahaPrompts,
  AHA_REPORT_PROMPTS,
  AHA_REPORT_SEED,
  AHA_SELECTION_PROMPTS,
  DEFAULT_TRACE_MIX,
  firstStepOpsReaching,
  generateTraces,
  heldOutCountdownProblems,
  isHeldOut,
  problemKey,
  promptPhrases,
  tinyTokenizerFiles,
  TINY_COUNTDOWN_OPTIONS,
  type Trace,
  VERIFY_PHRASE,
} from '../../src/tasks/traces';
import { createTask } from '../../src/tasks/index';
import { createRng } from '../../src/core/rng';
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
      const [search, check] = thinkText(t.completion).split(`. ${VERIFY_PHRASE} `);
      const steps = [...search.matchAll(stepRe)];
      expect(steps.length).toBe(t.style === 'drill' ? 1 : 2 * t.tries);
      for (const m of [...steps, ...(check ?? '').matchAll(stepRe)]) {
        expect(evalStep(+m[1], m[2], +m[3])).toBe(+m[4]);
      }
      if (t.problem.verifier.kind !== 'countdown') continue;
      const target = t.problem.verifier.target;
      // Only a careful trace opens with the backward word: the model's one-token choice of style.
      expect(search.startsWith(`${BACKWARD_WORD}: `)).toBe(t.style === 'careful');
      // A careful trace checks its answer forward exactly when its last try hit: "y op c = T".
      if (t.style === 'careful' && DEFAULT_TRACE_MIX.verifyHit && t.correct) {
        expect(check).toMatch(new RegExp(`^\\d+ [+\\-*/] \\d+ = ${target}$`));
      } else {
        expect(check).toBeUndefined();
      }
      // A try hits when its second step reaches what it aims at: the target for a forward guess,
      // the needed intermediate (the first step's result) for a backward try.
      const hits = [];
      for (let i = 0; i < steps.length; i += 2) {
        const [first, second] = [steps[i], steps[i + 1]];
        if (t.style === 'careful') {
          // "T (inverse op) c = y, a op b = z": the undone step starts from the target.
          expect(+first[1]).toBe(target);
          hits.push(+second[4] === +first[4]);
        } else {
          hits.push(+second[4] === target);
        }
      }
      // Only the last try may hit, and a careful trace is right exactly when it does (a forward
      // guess may also be right by another route than its written value, never here: it answers
      // what it computed).
      expect(hits.slice(0, -1).every((h) => !h)).toBe(true);
      expect(t.correct).toBe(hits[hits.length - 1]);
      // A careful trace that ends on a miss used all its tries, or its next pick would not have
      // fit (a try costs at most 26 tokens: ". wait 100 / 10 = 10, 10 * 10 = 100" and an answer
      // up to 3 tokens longer; with verifyHit a hit adds up to 11: ". check again 100 - 8 = 92"),
      // or it ran out of last steps to undo.
      const tryCost = 26 + (DEFAULT_TRACE_MIX.verifyHit ? 11 : 0);
      const tokens = completionTokenCount(t.completion);
      expect(tokens).toBeLessThanOrEqual(DEFAULT_TRACE_MIX.maxCompletionTokens);
      if (t.style === 'careful' && !t.correct && t.tries < DEFAULT_TRACE_MIX.maxTries) {
        const { nums } = t.problem.verifier;
        const lastSteps = backwardLastSteps(nums, target, 10).length;
        if (t.tries < lastSteps) {
          expect(tokens, t.completion).toBeGreaterThan(
            DEFAULT_TRACE_MIX.maxCompletionTokens - tryCost,
          );
        }
      }
      if (t.style === 'sloppy') expect(t.tries).toBe(1);
    }
  });

  it('mix: careful traces (and only they) reflect, and they are right more often', () => {
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
    // A careful (backward, aimed) try hits more often than a sloppy guess. A careful trace reflects
    // when its first try misses ("wait"), and also after a hit when it checks the hit
    // (verifyHit: "check again"), so then every careful trace reflects.
    const carefulFirstTryHit = rate(careful, (t) => t.tries === 1 && t.correct);
    expect(carefulFirstTryHit).toBeGreaterThan(firstTryHit + 0.05);
    expect(rate(careful, (t) => t.reflects)).toBeCloseTo(
      DEFAULT_TRACE_MIX.verifyHit ? 1 : 1 - carefulFirstTryHit,
      2,
    );
    expect(rate(sloppy, (t) => t.reflects)).toBe(0);
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

  it('backward: hand-worked tries, and the aimed first step hits whenever one can', () => {
    // [5, 6, 6] → 36: undo "x + 6 = 36" (x = 30), then 6 * 5 = 30 hits: (6 * 5) + 6.
    // 36 / 5 is no integer and 36 * 5 = 180 is out of a first step's reach; the second 6 repeats.
    expect(backwardLastSteps([5, 6, 6], 36, 10)).toEqual([
      { c: 5, op2: '+', y: 31, a: 6, b: 6 },
      { c: 5, op2: '-', y: 41, a: 6, b: 6 },
      { c: 6, op2: '+', y: 30, a: 6, b: 5 },
      { c: 6, op2: '-', y: 42, a: 6, b: 5 },
      { c: 6, op2: '*', y: 6, a: 6, b: 5 },
    ]);
    expect(firstStepOpsReaching(6, 5, 30)).toEqual(['*']);
    expect(firstStepOpsReaching(6, 5, 31)).toEqual([]);
    expect(firstStepOpsReaching(4, 2, 2)).toEqual(['-', '/']);
    const hit = { c: 6, op2: '+', y: 30, a: 6, b: 5, op1: '*', z: 30 };
    expect(backwardTrySteps(hit, 36)).toBe('36 - 6 = 30, 6 * 5 = 30');
    expect(backwardTryAnswer(hit)).toBe('(6 * 5) + 6');
    expect(verifyCountdown(backwardTryAnswer(hit), [5, 6, 6], 36)).toMatchObject({ ok: true });

    // Aimed (aimRate 1): each try hits exactly when some first-step op reaches its y, so a trace
    // fails only when no last step it tried was reachable.
    let right = 0;
    countdown.generate(23, 300).forEach((p, i) => {
      if (p.verifier.kind !== 'countdown') throw new Error('countdown expected');
      const { nums, target } = p.verifier;
      const t = backwardCountdownTrace(countdown, p, createRng(i), 12, 1, 10);
      const reachable = backwardLastSteps(nums, target, 10).some(
        (s) => firstStepOpsReaching(s.a, s.b, s.y).length > 0,
      );
      if (!reachable) expect(t.correct).toBe(false);
      if (reachable) expect(t.correct, t.completion).toBe(true); // 12 tries cover every last step
      right += t.correct ? 1 : 0;
    });
    expect(right / 300).toBeGreaterThan(0.6);
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

  it("the aha demo's selection prompts are held out and disjoint from its reported prompts", () => {
    const report = ahaPrompts('report', AHA_REPORT_PROMPTS);
    const selection = ahaPrompts('selection', AHA_SELECTION_PROMPTS);
    // The reported set is the plain held-out draw (so earlier reports stay comparable).
    expect(report.map(problemKey)).toEqual(
      heldOutCountdownProblems(AHA_REPORT_SEED, 200).map(problemKey),
    );
    expect(selection).toHaveLength(100);
    expect(selection.every(isHeldOut)).toBe(true);
    const reported = new Set(report.map(problemKey));
    expect(selection.filter((p) => reported.has(problemKey(p)))).toEqual([]);
    expect(new Set(selection.map(problemKey)).size).toBe(100);
    // The held-out pool of this setting is small: asking for more than it holds says so.
    expect(() => ahaPrompts('selection', 400)).toThrow(/only \d+ distinct held-out problems/);
    // Exhausting the held-out pool scans the whole problem stream: ~4 s alone, over vitest's default
    // 5 s when the kernel tests share the two cores (it timed out once in CI at 5.5 s).
  }, 30_000);

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

describe('tiny tokenizer with digit tokens', () => {
  it('keeps each fixed prompt span one token, prompts short, and round-trips traces', async () => {
    const files = tinyTokenizerFiles(0);
    const tok = await createTokenizer(files.tokenizerJson, files.tokenizerConfig);
    const digitMix = { ...DEFAULT_TRACE_MIX, wholeNumbersUpTo: 0 };
    expect(tok.vocabSize).toBe(69);
    expect(tok.bosTokenId).toBe(1);
    expect(tok.eosTokenIds).toEqual([2]);
    expect(tok.padTokenId).toBe(0);
    for (const phrase of promptPhrases()) {
      expect(tok.encode(phrase, { addSpecialTokens: false }), phrase).toHaveLength(1);
    }
    const unk = tok.tokenToId('<unk>');
    for (const t of generateTraces(3, 200, digitMix)) {
      const prompt = tok.encode(t.prompt);
      expect(prompt[0]).toBe(1);
      expect(prompt.length).toBeLessThanOrEqual(20);
      expect(tok.decode(prompt, { skipSpecialTokens: true })).toBe(t.prompt);
      const completion = tok.encode(t.completion, { addSpecialTokens: false });
      expect(completion).not.toContain(unk);
      // The generator's own count (which budgets a careful trace's tries) agrees, EOS added.
      expect(completionTokenCount(t.completion, 0)).toBe(completion.length + 1);
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

describe("tiny tokenizer with whole-number tokens (the shipped model's)", () => {
  it('makes each number up to N one token, cuts larger ones into digits, and counts as it cuts', async () => {
    expect(DEFAULT_TRACE_MIX.wholeNumbersUpTo).toBe(199);
    const files = tinyTokenizerFiles();
    expect(files).toEqual(tinyTokenizerFiles(199));
    const tok = await createTokenizer(files.tokenizerJson, files.tokenizerConfig);
    // 20 digit pieces become 400 number pieces (0..199, with and without a leading space).
    const digitsOnly = await createTokenizer(
      tinyTokenizerFiles(0).tokenizerJson,
      tinyTokenizerFiles(0).tokenizerConfig,
    );
    expect(tok.vocabSize).toBe(digitsOnly.vocabSize + 380);
    expect(
      tok.tokenStrings(tok.encode('36 - 6 = 30. wait 720', { addSpecialTokens: false })),
    ).toEqual(['36', ' -', ' 6', ' =', ' 30', '.', ' wait', ' ', '7', '2', '0']);
    expect(
      completionTokenCount(
        '<think>9 * 10 = 90, 90 * 8 = 720</think><answer>(9 * 10) * 8</answer>',
        199,
      ),
    ).toBe(
      // <think> 9 ␣* ␣10 ␣= ␣90 , ␣90 ␣* ␣8 ␣= ␣ 7 2 0 </think> <answer> ( 9 ␣* ␣10 ) ␣* ␣8 </answer> EOS
      26,
    );
    const mix = DEFAULT_TRACE_MIX;
    const unk = tok.tokenToId('<unk>');
    for (const t of generateTraces(5, 300, mix)) {
      const completion = tok.encode(t.completion, { addSpecialTokens: false });
      expect(completion).not.toContain(unk);
      expect(completionTokenCount(t.completion)).toBe(completion.length + 1);
      expect(completion.length + 1).toBeLessThanOrEqual(mix.maxCompletionTokens);
      expect(tok.decode(completion)).toBe(t.completion);
      const prompt = tok.encode(t.prompt);
      expect(tok.decode(prompt, { skipSpecialTokens: true })).toBe(t.prompt);
    }
    // The digit tokenizer (the earlier shipped model's) is unchanged by the option.
    expect(digitsOnly.vocabSize).toBe(69);
  });
});
