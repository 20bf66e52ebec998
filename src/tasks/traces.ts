// Synthetic reasoning traces for pretraining the bundled tiny model (public/models/tiny-reasoner),
// and that model's tokenizer. Problems come from the project's own task generators (countdown.ts,
// arithmetic.ts) and every trace is judged by their verifiers, so the corpus speaks exactly the
// language the GRPO demo rewards.
//
// The trace language. A "sloppy" Countdown trace guesses forward, one candidate step by step, and
// answers it whatever it evaluated to:
//   <think>7 * 6 = 42, 42 + 1 = 43</think><answer>(7 * 6) + 1</answer>
// Its first step is a uniform random pick; its second step aims at the target (takes the operation
// that reaches it, when one does) only with probability `aimRate`.
// A "careful" trace works backward from the target and checks (carefulDirection 'backward', the
// shipped mix): it undoes a last step "x op c = T" in writing ("36 - 6 = 30": x would have to be
// 30), then computes a first step on the other two numbers and compares ("5 * 6 = 30": a hit).
// On a mismatch it reflects ("wait", a docs/grpo.md §7 marker) and tries another last step, up to
// `maxTries`:
//   <think>36 - 4 = 32, 6 * 5 = 30. wait 36 - 6 = 30, 6 * 5 = 30</think><answer>(6 * 5) + 6</answer>
// Every choice a careful try makes is local: the undone step is a random pick among the valid
// ones, and the first step's operation is a single-digit fact lookup (which of a+b, a-b, a*b, a/b
// is the needed value), not the two-digit search that aiming a forward guess needs (a tiny model
// does not learn that one: tools/pretrain/README.md). No trace knows the answer: working backward
// and checking is what makes a careful trace right more often, and the base model's lever under
// GRPO is to work that way more often, a choice it makes at the first token of its think text (copy
// the target, or a number). That is the research constraint the bundled model is built for: RL
// mostly selects behaviours the base model already shows sometimes ("Cognitive Behaviors":
// verification, backtracking, backward chaining). carefulDirection 'forward' keeps the earlier
// mixes' careful traces (forward guesses, checked) reproducible. Arithmetic drills (arithmetic.ts)
// teach the single-step sums and products the checks rely on.
//
// Held-out split: a problem is held out when the FNV-1a hash of its canonical key falls in the
// first HELD_OUT_PER_MILLE of 1000 buckets; the corpus never contains held-out problems, so any
// evaluation on them (the model card's base rates, the GRPO demo's eval) is on unseen prompts.

import { createArithmeticTask, type ArithmeticOptions } from './arithmetic';
import {
  COUNTDOWN_DEFAULTS,
  countdownQuestion,
  createCountdownTask,
  type CountdownOptions,
} from './countdown';
import { R1_ZERO_TEMPLATE } from './prompt';
import { createRng, mixSeeds, type Rng } from '../core/rng';
import type { Problem, Task } from './types';

/** The Countdown setting the tiny reasoner is trained for: 3 numbers in 1..10, targets 1..100.
 * Single-digit operands keep each checking step short (about 14 tokens) and its arithmetic within
 * reach of a 0.2M-parameter model. */
export const TINY_COUNTDOWN_OPTIONS: Partial<CountdownOptions> = {
  numbers: 3,
  minNumber: 1,
  maxNumber: 10,
  minTarget: 1,
  maxTarget: 100,
};

/** Arithmetic drill settings: single-digit + - *, two-digit + -. */
export const TINY_ARITHMETIC_OPTIONS: Partial<ArithmeticOptions>[] = [
  { digits: 1, operations: '+-*' },
  { digits: 2, operations: '+-' },
];

export interface TraceMix {
  countdown: Partial<CountdownOptions>;
  arithmetic: Partial<ArithmeticOptions>[];
  /** Fraction of traces that are arithmetic drills (the rest are Countdown). */
  arithmeticShare: number;
  /** Probability that a Countdown trace is careful: checks its results and reflects on a mismatch. */
  checkRate: number;
  /** Candidates a careful trace tries at most (each costs about 16 tokens). */
  maxTries: number;
  /** Probability that a sloppy try's second step aims at the target (see countdownTrace). */
  aimRate: number;
  /** The same for a careful trace: checking and aiming are one disposition, "work carefully",
   * which GRPO can select as a whole (the "Cognitive Behaviors" finding that RL amplifies a
   * behaviour the base model already shows sometimes). */
  carefulAimRate: number;
  /** Completion tokens a trace may use, EOS included: a careful trace starts no try that would not
   * fit, so the corpus never teaches completions the demo's maxCompletionLength would truncate. */
  maxCompletionTokens: number;
  /** How a careful trace searches: 'backward' from the target (the shipped mix) or 'forward'
   * guesses checked against it (mixes A–F of tools/pretrain/README.md). */
  carefulDirection: 'forward' | 'backward';
  /** A backward careful trace that hits checks its answer forward before answering
   * (". check again 30 + 6 = 36"), so every careful trace reflects: with "wait" after a miss, with
   * "check again" (docs/grpo.md §7 markers both) after a hit. */
  verifyHit: boolean;
  /** How the tiny tokenizer cuts numbers: 0, one token per digit; N > 0, every whole number up to
   * N is one token (" 36"), larger ones fall apart into digits. Traces budget their tries by it. */
  wholeNumbersUpTo: number;
}

/** The mix of the shipped model (tools/pretrain/README.md tells how it was chosen). */
export const DEFAULT_TRACE_MIX: TraceMix = {
  countdown: TINY_COUNTDOWN_OPTIONS,
  arithmetic: TINY_ARITHMETIC_OPTIONS,
  arithmeticShare: 0.1,
  checkRate: 0.2,
  maxTries: 4,
  aimRate: 0.5,
  carefulAimRate: 1,
  maxCompletionTokens: 80,
  carefulDirection: 'backward',
  verifyHit: true,
  wholeNumbersUpTo: 199,
};

export const REFLECTION_WORD = 'wait';
/** What a careful trace says before checking its answer forward (a docs/grpo.md §7 marker). */
export const VERIFY_PHRASE = 'check again';
/** How a careful trace opens ("backward: 36 - 6 = 30, …"): it names its way of working first, so
 * a tiny model keeps the two procedures apart (without it, forward guesses borrowed the backward
 * tries' pattern and stopped using the prompt's numbers), and the choice is one token. */
export const BACKWARD_WORD = 'backward';

export type TraceStyle = 'drill' | 'sloppy' | 'careful';

export interface Trace {
  problem: Problem;
  /** The R1-Zero prompt (docs/grpo.md §8) the completion answers. */
  prompt: string;
  /** "<think>…</think><answer>…</answer>" (the EOS token is added by the tokenizer's user). */
  completion: string;
  style: TraceStyle;
  /** Candidates computed in the think text (1 for drills). */
  tries: number;
  /** Whether the think text contains the reflection word. */
  reflects: boolean;
  /** The task verifier's verdict on the answer. */
  correct: boolean;
}

// ---------------------------------------------------------------------------------------------
// Held-out split

export const HELD_OUT_PER_MILLE = 100;

function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** Canonical identity of a problem: the multiset of numbers and the target for Countdown (the same
 * numbers in another order are the same problem), the question otherwise. */
export function problemKey(problem: Problem): string {
  const v = problem.verifier;
  if (v.kind === 'countdown') {
    return `countdown:${[...v.nums].sort((a, b) => a - b).join(',')}=${v.target}`;
  }
  return `${problem.task}:${problem.question}`;
}

/** True for the ~10% of problems that the pretraining corpus never contains. */
export function isHeldOut(problem: Problem): boolean {
  return fnv1a(problemKey(problem)) % 1000 < HELD_OUT_PER_MILLE;
}

// ---------------------------------------------------------------------------------------------
// Countdown candidates

export interface Candidate {
  /** First step: a op1 b = x. */
  a: number;
  op1: string;
  b: number;
  x: number;
  /** Second step: x op2 c (xFirst) or c op2 x = value. */
  c: number;
  op2: string;
  xFirst: boolean;
  value: number;
}

const OPS = ['+', '-', '*', '/'] as const;

function apply(a: number, op: string, b: number): number | null {
  // Non-negative integer intermediates only, as the task generator builds its solutions: every
  // step of a trace is then a plain integer fact.
  switch (op) {
    case '+':
      return a + b;
    case '-':
      return a >= b ? a - b : null;
    case '*':
      return a * b;
    default:
      return b !== 0 && a % b === 0 ? a / b : null;
  }
}

/** Every two-step equation over three numbers with integer non-negative intermediates, one per
 * distinct text, in a fixed order. */
export function countdownCandidates(nums: readonly number[]): Candidate[] {
  if (nums.length !== 3)
    throw new RangeError(`traces support 3 Countdown numbers, got ${nums.length}`);
  const out = new Map<string, Candidate>();
  for (let i = 0; i < 3; i++) {
    for (let j = 0; j < 3; j++) {
      if (i === j) continue;
      const [a, b, c] = [nums[i], nums[j], nums[3 - i - j]];
      for (const op1 of OPS) {
        const x = apply(a, op1, b);
        if (x === null) continue;
        for (const op2 of OPS) {
          for (const xFirst of [true, false]) {
            const value = xFirst ? apply(x, op2, c) : apply(c, op2, x);
            if (value === null) continue;
            const cand = { a, op1, b, x, c, op2, xFirst, value };
            out.set(candidateAnswer(cand), cand);
          }
        }
      }
    }
  }
  return [...out.values()];
}

export function candidateSteps(k: Candidate): string {
  const second = k.xFirst ? `${k.x} ${k.op2} ${k.c}` : `${k.c} ${k.op2} ${k.x}`;
  return `${k.a} ${k.op1} ${k.b} = ${k.x}, ${second} = ${k.value}`;
}

export function candidateAnswer(k: Candidate): string {
  const first = `(${k.a} ${k.op1} ${k.b})`;
  return k.xFirst ? `${first} ${k.op2} ${k.c}` : `${k.c} ${k.op2} ${first}`;
}

// ---------------------------------------------------------------------------------------------
// Traces

const completionText = (think: string, answer: string) =>
  `<think>${think}</think><answer>${answer}</answer>`;

/** The tiny tokenizer's pre-tokenizer split (see tinyTokenizerFiles), digits one by one or whole
 * numbers together. */
const piecePattern = (wholeNumbers: boolean) =>
  wholeNumbers ? / ?[0-9]+| ?[A-Za-z]+| ?[^ 0-9A-Za-z]/g : / ?[0-9]| ?[A-Za-z]+| ?[^ 0-9A-Za-z]/g;

/** Tokens of a piece: one, unless it is a number beyond the whole-number tokens, which the
 * tokenizer's BPE (no merges) cuts into its characters (" 720" → " ", "7", "2", "0"). */
function pieceTokens(piece: string, wholeNumbersUpTo: number): number {
  const m = /^( ?)([0-9]+)$/.exec(piece);
  if (!m || wholeNumbersUpTo === 0 || Number(m[2]) <= wholeNumbersUpTo) return 1;
  return m[1].length + m[2].length;
}

/** Tokens of a completion under the tiny tokenizer, EOS included: the four tags are one token
 * each, everything else one token per pre-tokenizer piece (see pieceTokens). */
export function completionTokenCount(
  completion: string,
  wholeNumbersUpTo = DEFAULT_TRACE_MIX.wholeNumbersUpTo,
): number {
  let count = 1; // EOS
  const pattern = piecePattern(wholeNumbersUpTo > 0);
  for (const part of completion.split(/(<\/?(?:think|answer)>)/)) {
    if (part === '') continue;
    if (/^<\/?(?:think|answer)>$/.test(part)) count += 1;
    else
      for (const piece of part.match(pattern) ?? []) count += pieceTokens(piece, wholeNumbersUpTo);
  }
  return count;
}

export function promptText(task: Task, problem: Problem): string {
  const p = task.formatPrompt(problem, 'r1-zero');
  if (p.kind !== 'text') throw new Error('the r1-zero template gives text prompts');
  return p.text;
}

/** One Countdown trace; `careful` decides whether results are checked against the target, and
 * `aimRate` how often a try's second step picks the operation that reaches the target when one
 * does (the trace's "intuition": a local, learnable rule; the first step stays a random pick). */
export function countdownTrace(
  task: Task,
  problem: Problem,
  rng: Rng,
  careful: boolean,
  maxTries: number,
  aimRate = 0,
  maxCompletionTokens = Infinity,
  wholeNumbersUpTo = DEFAULT_TRACE_MIX.wholeNumbersUpTo,
): Trace {
  const v = problem.verifier;
  if (v.kind !== 'countdown') throw new RangeError(`not a Countdown problem: ${problem.id}`);
  const all = countdownCandidates(v.nums);
  const tried: Candidate[] = [];
  const used = new Set<string>();
  while (tried.length < maxTries && used.size < all.length) {
    const fresh = all.filter((k) => !used.has(candidateAnswer(k)));
    let cand = fresh[rng.int(0, fresh.length - 1)];
    const aim = rng.next() < aimRate;
    if (aim) {
      const hit = fresh.find(
        (k) => k.a === cand.a && k.op1 === cand.op1 && k.b === cand.b && k.value === v.target,
      );
      if (hit) cand = hit;
    }
    if (tried.length > 0) {
      const think = [...tried, cand].map(candidateSteps).join(`. ${REFLECTION_WORD} `);
      const text = completionText(think, candidateAnswer(cand));
      if (completionTokenCount(text, wholeNumbersUpTo) > maxCompletionTokens) break;
    }
    tried.push(cand);
    used.add(candidateAnswer(cand));
    if (!careful || cand.value === v.target) break;
  }
  const answer = candidateAnswer(tried[tried.length - 1]);
  const think = tried.map(candidateSteps).join(`. ${REFLECTION_WORD} `);
  return {
    problem,
    prompt: promptText(task, problem),
    completion: completionText(think, answer),
    style: careful ? 'careful' : 'sloppy',
    tries: tried.length,
    reflects: tried.length > 1,
    correct: task.verify(answer, problem) === true,
  };
}

// ---------------------------------------------------------------------------------------------
// Backward tries (careful traces)

/** The operation that undoes each last step "x op c = T": x = T (inverse op) c. */
const INVERSE_OP: Record<string, string> = { '+': '-', '-': '+', '*': '/', '/': '*' };

/** A last step to undo: "x op2 c = T" needs x = y, computed as "T (inverse op2) c = y". */
export interface LastStep {
  c: number;
  op2: string;
  y: number;
  /** The other two numbers, larger first (so a - b and a / b read naturally). */
  a: number;
  b: number;
}

/** Every last step a careful trace may undo: y a non-negative integer that a first step on two
 * numbers of the range can reach (y ≤ maxNumber², which also keeps the written arithmetic within
 * two digits), one per distinct (c, op2), in a fixed order. */
export function backwardLastSteps(
  nums: readonly number[],
  target: number,
  maxNumber: number,
): LastStep[] {
  if (nums.length !== 3)
    throw new RangeError(`traces support 3 Countdown numbers, got ${nums.length}`);
  const out = new Map<string, LastStep>();
  for (let i = 0; i < 3; i++) {
    const c = nums[i];
    const [p, q] = nums.filter((_, k) => k !== i);
    for (const op2 of OPS) {
      const y = apply(target, INVERSE_OP[op2], c);
      if (y === null || y > maxNumber * maxNumber) continue;
      const key = `${c}${op2}`;
      if (!out.has(key)) out.set(key, { c, op2, y, a: Math.max(p, q), b: Math.min(p, q) });
    }
  }
  return [...out.values()];
}

/** The first-step operations on (a, b) that give y, in a fixed order (empty: the step misses). */
export function firstStepOpsReaching(a: number, b: number, y: number): string[] {
  return OPS.filter((op) => apply(a, op, b) === y);
}

/** A careful try: the undone last step, then the first step and its value z (a hit when z = y). */
export interface BackwardTry extends LastStep {
  op1: string;
  z: number;
}

export function backwardTrySteps(t: BackwardTry, target: number): string {
  return `${target} ${INVERSE_OP[t.op2]} ${t.c} = ${t.y}, ${t.a} ${t.op1} ${t.b} = ${t.z}`;
}

export function backwardTryAnswer(t: BackwardTry): string {
  return `(${t.a} ${t.op1} ${t.b}) ${t.op2} ${t.c}`;
}

/** A careful Countdown trace that works backward: each try undoes a random not-yet-tried last step
 * and takes the first-step operation that reaches the needed value when one does (with probability
 * `aimRate`; otherwise, and when none does, a random valid one), until a hit, `maxTries`, or a try
 * that would not fit in `maxCompletionTokens`. */
export function backwardCountdownTrace(
  task: Task,
  problem: Problem,
  rng: Rng,
  maxTries: number,
  aimRate: number,
  maxNumber: number,
  maxCompletionTokens = Infinity,
  verifyHit = false,
  wholeNumbersUpTo = DEFAULT_TRACE_MIX.wholeNumbersUpTo,
): Trace {
  const v = problem.verifier;
  if (v.kind !== 'countdown') throw new RangeError(`not a Countdown problem: ${problem.id}`);
  const steps = backwardLastSteps(v.nums, v.target, maxNumber);
  if (steps.length === 0) throw new RangeError(`no last step to undo in ${problem.question}`);
  const tried: BackwardTry[] = [];
  const think = (tries: BackwardTry[]) => {
    const text =
      `${BACKWARD_WORD}: ` +
      tries.map((t) => backwardTrySteps(t, v.target)).join(`. ${REFLECTION_WORD} `);
    const last = tries[tries.length - 1];
    // The forward check of a hit: y op2 c = T, the answer's own value.
    return verifyHit && last.z === last.y
      ? `${text}. ${VERIFY_PHRASE} ${last.y} ${last.op2} ${last.c} = ${v.target}`
      : text;
  };
  const fresh = [...steps];
  while (tried.length < maxTries && fresh.length > 0) {
    const last = fresh.splice(rng.int(0, fresh.length - 1), 1)[0];
    const reaching = firstStepOpsReaching(last.a, last.b, last.y);
    const aim = rng.next() < aimRate;
    const valid = OPS.filter((op) => apply(last.a, op, last.b) !== null);
    const op1 = aim && reaching.length > 0 ? reaching[0] : valid[rng.int(0, valid.length - 1)];
    const attempt: BackwardTry = { ...last, op1, z: apply(last.a, op1, last.b) as number };
    if (tried.length > 0) {
      const text = completionText(think([...tried, attempt]), backwardTryAnswer(attempt));
      if (completionTokenCount(text, wholeNumbersUpTo) > maxCompletionTokens) break;
    }
    tried.push(attempt);
    if (attempt.z === attempt.y) break;
  }
  const answer = backwardTryAnswer(tried[tried.length - 1]);
  const reflects = tried.length > 1 || (verifyHit && tried[0].z === tried[0].y);
  return {
    problem,
    prompt: promptText(task, problem),
    completion: completionText(think(tried), answer),
    style: 'careful',
    tries: tried.length,
    reflects,
    correct: task.verify(answer, problem) === true,
  };
}

/** An arithmetic drill: the step and its result, always right. */
export function arithmeticTrace(task: Task, problem: Problem): Trace {
  const m = /^Compute (\d+) ([+\-*]) (\d+) /.exec(problem.question);
  if (!m || problem.reference === null) {
    throw new RangeError(`not an arithmetic question: ${problem.question}`);
  }
  const answer = problem.reference;
  return {
    problem,
    prompt: promptText(task, problem),
    completion: completionText(`${m[1]} ${m[2]} ${m[3]} = ${answer}`, answer),
    style: 'drill',
    tries: 1,
    reflects: false,
    correct: task.verify(answer, problem) === true,
  };
}

/** `count` problems of `task` that are not held out (drawn in chunks from seeded streams). */
function trainingProblems(task: Task, seed: number, count: number): Problem[] {
  const out: Problem[] = [];
  for (let chunk = 0; out.length < count; chunk++) {
    if (chunk > 1000) throw new Error(`${task.name}: too few problems outside the held-out split`);
    for (const p of task.generate(mixSeeds(seed, chunk), Math.max(64, count))) {
      if (!isHeldOut(p)) out.push(p);
      if (out.length === count) break;
    }
  }
  return out;
}

/** `count` traces in a seeded order; the same (seed, count, mix) always gives the same corpus. */
export function generateTraces(
  seed: number,
  count: number,
  mix: TraceMix = DEFAULT_TRACE_MIX,
): Trace[] {
  if (!(mix.checkRate >= 0 && mix.checkRate <= 1)) throw new RangeError('checkRate ∉ [0, 1]');
  if (!(mix.arithmeticShare >= 0 && mix.arithmeticShare <= 1)) {
    throw new RangeError('arithmeticShare ∉ [0, 1]');
  }
  if (!Number.isInteger(mix.maxTries) || mix.maxTries < 1) throw new RangeError('maxTries < 1');
  if (!(mix.aimRate >= 0 && mix.aimRate <= 1)) throw new RangeError('aimRate ∉ [0, 1]');
  if (!Number.isInteger(mix.wholeNumbersUpTo) || mix.wholeNumbersUpTo < 0) {
    throw new RangeError('wholeNumbersUpTo must be a non-negative integer');
  }
  if (!(mix.carefulAimRate >= 0 && mix.carefulAimRate <= 1)) {
    throw new RangeError('carefulAimRate ∉ [0, 1]');
  }
  if (mix.carefulDirection !== 'forward' && mix.carefulDirection !== 'backward') {
    throw new RangeError(`carefulDirection must be 'forward' or 'backward'`);
  }
  const rng = createRng(mixSeeds(seed, 0x7ace));
  const cd = createCountdownTask(mix.countdown);
  const drills = mix.arithmetic.map((o) => createArithmeticTask(o));
  const nDrill = drills.length === 0 ? 0 : Math.round(count * mix.arithmeticShare);
  const traces: Trace[] = [];
  for (const problem of trainingProblems(cd, mixSeeds(seed, 1), count - nDrill)) {
    const careful = rng.next() < mix.checkRate;
    if (careful && mix.carefulDirection === 'backward') {
      const maxNumber = mix.countdown.maxNumber ?? COUNTDOWN_DEFAULTS.maxNumber;
      traces.push(
        backwardCountdownTrace(
          cd,
          problem,
          rng,
          mix.maxTries,
          mix.carefulAimRate,
          maxNumber,
          mix.maxCompletionTokens,
          mix.verifyHit,
          mix.wholeNumbersUpTo,
        ),
      );
      continue;
    }
    const aimRate = careful ? mix.carefulAimRate : mix.aimRate;
    traces.push(
      countdownTrace(
        cd,
        problem,
        rng,
        careful,
        mix.maxTries,
        aimRate,
        mix.maxCompletionTokens,
        mix.wholeNumbersUpTo,
      ),
    );
  }
  drills.forEach((task, i) => {
    const n = Math.floor(nDrill / drills.length) + (i < nDrill % drills.length ? 1 : 0);
    for (const problem of trainingProblems(task, mixSeeds(seed, 2 + i), n)) {
      traces.push(arithmeticTrace(task, problem));
    }
  });
  return rng.shuffle(traces);
}

/** The task with every held-out problem removed from its stream (prefix-stable, as Task requires). */
export function withoutHeldOut(task: Task): Task {
  return {
    ...task,
    generate(seed, count) {
      const out: Problem[] = [];
      for (let n = count * 2 + 16; out.length < count; n *= 2) {
        out.length = 0;
        for (const p of task.generate(seed, n)) {
          if (!isHeldOut(p)) out.push(p);
          if (out.length === count) break;
        }
      }
      return out;
    },
  };
}

/** `count` distinct held-out Countdown problems (never in any corpus) for evaluation, none of them
 * in `exclude`. */
export function heldOutCountdownProblems(
  seed: number,
  count: number,
  options: Partial<CountdownOptions> = TINY_COUNTDOWN_OPTIONS,
  exclude: readonly Problem[] = [],
): Problem[] {
  const task = createCountdownTask(options);
  const seen = new Set<string>(exclude.map(problemKey));
  const out: Problem[] = [];
  for (let chunk = 0; out.length < count; chunk++) {
    if (chunk > 200) {
      throw new Error(`only ${out.length} distinct held-out problems found, ${count} asked for`);
    }
    for (const p of task.generate(mixSeeds(seed, chunk), 4096)) {
      const key = problemKey(p);
      if (!isHeldOut(p) || seen.has(key)) continue;
      seen.add(key);
      out.push(p);
      if (out.length === count) break;
    }
  }
  return out;
}

/** The seeds of the aha demo's two held-out prompt sets (see ahaPrompts). */
export const AHA_REPORT_SEED = 20261122;
export const AHA_SELECTION_SEED = 20261124;
/** How many prompts the aha report evaluates on (the preset's evalPrompts). */
export const AHA_REPORT_PROMPTS = 200;
/** The tiny Countdown setting has only ~300 distinct held-out problems, so the selection set is
 * what is left beside the reported 200. */
export const AHA_SELECTION_PROMPTS = 100;
export type AhaPromptSet = 'report' | 'selection';

/**
 * The aha demo's prompts, both held out (never in the pretraining corpus nor in the RL prompts):
 * 'report' is the set `npm run aha` reports on (the first `count` of it); 'selection' is a set
 * disjoint from all AHA_REPORT_PROMPTS reported ones, on which the preset's options (its learning
 * rate) are chosen, so that no reported number steered a choice.
 */
export function ahaPrompts(set: AhaPromptSet, count: number): Problem[] {
  if (set === 'report') return heldOutCountdownProblems(AHA_REPORT_SEED, count);
  const report = heldOutCountdownProblems(AHA_REPORT_SEED, AHA_REPORT_PROMPTS);
  return heldOutCountdownProblems(AHA_SELECTION_SEED, count, TINY_COUNTDOWN_OPTIONS, report);
}

// ---------------------------------------------------------------------------------------------
// The tiny reasoner's tokenizer (Hugging Face tokenizer.json, read by @huggingface/transformers).
//
// Prompts stay short because each fixed span of the R1-Zero template and of the task questions is
// ONE token (an added token, matched leftmost-longest before anything else): the template's text
// is unchanged, only cut into few pieces. The rest is split by a regex into digits, operators and
// words, each optionally with one leading space (" 4", " +", " wait"), so "7 * 6 = 42" is 6 tokens
// and decoding is plain concatenation (Fuse): encode/decode round-trips in-domain text exactly.

export const SPECIAL_TOKENS = { pad: '<pad>', bos: '<s>', eos: '</s>', unk: '<unk>' } as const;
export const TAG_TOKENS = ['<think>', '</think>', '<answer>', '</answer>'] as const;
const PIECE_CHARS = ['+', '-', '*', '/', '=', '(', ')', ',', '.', ':', '[', ']'];
const WORDS = [REFLECTION_WORD, ...VERIFY_PHRASE.split(' '), BACKWARD_WORD];

/** Splits a text around every match of `re`: [before, after], requiring exactly one match. */
function around(text: string, re: RegExp): [string, string] {
  const m = re.exec(text);
  if (!m) throw new Error(`cannot find ${re} in ${JSON.stringify(text)}`);
  return [text.slice(0, m.index), text.slice(m.index + m[0].length)];
}

/** The fixed spans of the prompts, derived from the task code so a wording change shows up as a
 * test failure (the span would no longer be one token). */
export function promptPhrases(): string[] {
  const [prefix, suffix] = R1_ZERO_TEMPLATE.split('{prompt}');
  const q = countdownQuestion([1111, 2222, 3333], 4444);
  const [cdHead, rest1] = around(q, /1111/);
  const [, rest2] = around(rest1, /3333/);
  const [cdMid, cdTail] = around(rest2, /4444/);
  const aq = createArithmeticTask({ digits: 3, operations: '+' }).generate(0, 1)[0].question;
  const [arHead, arRest] = around(aq, /\d+ \+ \d+/);
  // The template drops a question's final period before its own ". Assistant:"; the Countdown
  // question ends with "</answer>", the arithmetic one with "tags", so neither is cut.
  return [prefix, suffix, cdHead, cdMid, cdTail, arHead, arRest];
}

export interface TokenizerFiles {
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
}

export function tinyTokenizerFiles(
  wholeNumbersUpTo = DEFAULT_TRACE_MIX.wholeNumbersUpTo,
): TokenizerFiles {
  const specials = [SPECIAL_TOKENS.pad, SPECIAL_TOKENS.bos, SPECIAL_TOKENS.eos, SPECIAL_TOKENS.unk];
  const added = [...specials, ...TAG_TOKENS, ...promptPhrases()];
  const pieces: string[] = [];
  // Digits always (numbers beyond the whole-number tokens fall apart into them), then 10..N.
  for (let n = 0; n <= Math.max(9, wholeNumbersUpTo); n++) pieces.push(String(n), ` ${n}`);
  for (const c of PIECE_CHARS) pieces.push(c, ` ${c}`);
  for (const w of WORDS) pieces.push(w, ` ${w}`);
  pieces.push(' ', '\n');
  const vocab: Record<string, number> = {};
  [...added, ...pieces].forEach((t, id) => {
    if (t in vocab) throw new Error(`duplicate token ${JSON.stringify(t)}`);
    vocab[t] = id;
  });
  const addedTokens = added.map((content, id) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: id < specials.length,
  }));
  const tokenizerJson = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: null,
    pre_tokenizer: {
      type: 'Split',
      pattern: { Regex: piecePattern(wholeNumbersUpTo > 0).source },
      behavior: 'Isolated',
      invert: false,
    },
    post_processor: {
      type: 'TemplateProcessing',
      single: [
        { SpecialToken: { id: SPECIAL_TOKENS.bos, type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
      ],
      pair: [
        { SpecialToken: { id: SPECIAL_TOKENS.bos, type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: SPECIAL_TOKENS.bos, type_id: 1 } },
        { Sequence: { id: 'B', type_id: 1 } },
      ],
      special_tokens: {
        [SPECIAL_TOKENS.bos]: { id: SPECIAL_TOKENS.bos, ids: [1], tokens: [SPECIAL_TOKENS.bos] },
      },
    },
    decoder: { type: 'Fuse' },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: SPECIAL_TOKENS.unk,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      // Whole pieces map straight to their id; anything else falls apart into characters.
      ignore_merges: true,
      vocab,
      merges: [],
    },
  };
  const addedTokensDecoder: Record<string, unknown> = {};
  for (const t of addedTokens) {
    const { id, ...rest } = t;
    addedTokensDecoder[String(id)] = rest;
  }
  const tokenizerConfig = {
    tokenizer_class: 'PreTrainedTokenizerFast',
    bos_token: SPECIAL_TOKENS.bos,
    eos_token: SPECIAL_TOKENS.eos,
    pad_token: SPECIAL_TOKENS.pad,
    unk_token: SPECIAL_TOKENS.unk,
    add_bos_token: true,
    add_eos_token: false,
    // Decoding must give back the exact text: no space clean-up before punctuation.
    clean_up_tokenization_spaces: false,
    model_max_length: 128,
    added_tokens_decoder: addedTokensDecoder,
  };
  return { tokenizerJson, tokenizerConfig };
}
