// The R1 paper's three findings, put to the miniature (`npm run recipe -- --compare`, protocol in
// docs/recipe/protocol.md): what is compared, the one recipe per seed that trains every arm, and
// the decision rule. Pure (no GPU, no files), so the command, the Paper view and the unit tests share
// it.
//   finding 1  RL alone teaches reasoning (R1 §2.2): R1-Zero (GRPO from the base model, the aha
//              preset) against the base model, on accuracy and reflection.
//   finding 2  a cold start helps RL (R1 §2.3.1): cold start (SFT on careful traces) → GRPO against
//              GRPO alone, the same GRPO steps on the same model.
//   finding 3  distilling a stronger model beats RL on the small one (R1 §4.1, Table 6): the student
//              fine-tuned on the teacher's verified (rejection-sampled) outputs against GRPO on the
//              student, the same GRPO steps the teacher had; and, reported beside it, distillation
//              then GRPO. The teacher is finding 1's R1-Zero model: one teacher per seed.
// A finding is "reproduced" only when its direction holds on every seed and the pooled 95% Wilson
// intervals (every seed's completions together) separate; "not reproduced" when the pooled
// intervals separate the other way or no seed goes the paper's way; "inconclusive" otherwise.
import { wilsonInterval, type Interval as WilsonInterval } from '../core/wilson';
import { parseRecipe, type Recipe } from './recipe-spec';

/** Options of the findings recipe (protocol.md lists the values the report uses). */
export interface FindingsOptions {
  /** GRPO steps on the tiny reasoner: R1-Zero (the teacher) and cold start → GRPO alike. */
  reasonerSteps: number;
  /** GRPO steps on the student: GRPO alone and distillation → GRPO alike. */
  studentSteps: number;
  /** The student model a stage's `from: "model:<ref>"` loads. */
  student: string;
  /** Cold-start traces (R1 §2.3.1's "thousands", in miniature). */
  coldStartCount: number;
  /** Training prompts the teacher is sampled on, k completions each. */
  teacherPrompts: number;
  teacherK: number;
  /** SFT options of the cold start and of the distillation (epochs, batch, learning rate). */
  coldStartSft: Record<string, unknown>;
  distillSft: Record<string, unknown>;
  /** GRPO options over the aha preset (tests shrink the groups). */
  grpo?: Record<string, unknown>;
}

/** The options of the report (protocol.md, "Options"). */
export const FINDINGS_DEFAULTS: FindingsOptions = {
  // The aha preset's own 95 steps: the aha demo moves accuracy in about that many (docs/aha).
  reasonerSteps: 95,
  // As many GRPO steps as the distillation's SFT steps ("the same student steps"), which the time
  // budget allows three times over (protocol.md, "Time budget").
  studentSteps: 30,
  student: 'tiny-student',
  coldStartCount: 256,
  teacherPrompts: 128,
  teacherK: 4,
  coldStartSft: {
    learningRate: 3e-4,
    numTrainEpochs: 1,
    perDeviceTrainBatchSize: 16,
    maxLength: 128,
    saveSteps: 8,
  },
  // Up to 3 epochs over the kept samples, capped at studentSteps optimizer steps (findingsRecipe).
  distillSft: {
    learningRate: 3e-4,
    numTrainEpochs: 3,
    perDeviceTrainBatchSize: 16,
    maxLength: 128,
    saveSteps: 8,
  },
};

/** `--quick`: every arm end to end in a few minutes (2 GRPO steps an arm, a few SFT steps, a
 * small teacher set): checks the command, measures nothing. */
export const QUICK: Partial<FindingsOptions> = {
  reasonerSteps: 2,
  studentSteps: 2,
  coldStartCount: 16,
  teacherPrompts: 8,
  coldStartSft: { ...FINDINGS_DEFAULTS.coldStartSft, maxSteps: 2, saveSteps: 1 },
  distillSft: { ...FINDINGS_DEFAULTS.distillSft, maxSteps: 2, saveSteps: 1 },
};
/** Held-out prompts a --quick run scores. */
export const QUICK_PROMPTS = 8;

/** Seconds per unit of work on the 2-core machine of protocol.md's time budget (SwiftShader), each
 * from an earlier measurement there (the aha demo's GRPO steps, the earlier comparison's SFT steps,
 * rejection samples and evaluations); the student's is an estimate until it is measured. */
export const BUDGET = {
  reasonerGrpoStep: 7.65,
  coldStartGrpoStep: 7.9,
  reasonerSftStep: 2.6,
  studentSftStep: 2.2,
  studentGrpoStep: 3.0,
  teacherSample: 65 / 512,
  /** One evaluation of 200 completions. */
  evalReasoner: 12,
  evalStudent: 6,
};

/** The projected seconds of a comparison of `seeds` seeds scoring `completions` held-out
 * completions a model (protocol.md, "Time budget"; the command prints it as it starts). */
export function projectedSeconds(
  o: FindingsOptions,
  seeds: number,
  completions = 200,
  b = BUDGET,
): number {
  const sftSteps = (sft: Record<string, unknown>, rows: number, cap?: number) => {
    const batch = Number(sft.perDeviceTrainBatchSize ?? 8);
    const steps = Math.ceil(rows / batch) * Number(sft.numTrainEpochs ?? 1);
    const max = (sft.maxSteps as number | undefined) ?? cap;
    return max === undefined ? steps : Math.min(steps, max);
  };
  const evals = (completions / 200) * (b.evalReasoner + b.evalStudent);
  const perSeed =
    o.reasonerSteps * (b.reasonerGrpoStep + b.coldStartGrpoStep) +
    sftSteps(o.coldStartSft, o.coldStartCount) * b.reasonerSftStep +
    o.teacherPrompts * o.teacherK * b.teacherSample +
    // At most every sample kept: the cap is the student's steps.
    sftSteps(o.distillSft, o.teacherPrompts * o.teacherK, o.studentSteps) * b.studentSftStep +
    2 * o.studentSteps * b.studentGrpoStep +
    3 * evals;
  return seeds * perSeed + evals;
}

/** The recipe's stage names (each arm's weights are the end of one of them). */
export const STAGE = {
  teacher: 'r1-zero',
  teacherSamples: 'teacher-samples',
  studentSft: 'student-sft',
  studentSftRl: 'student-sft-rl',
  studentRl: 'student-rl',
  coldStart: 'cold-start',
  coldStartRl: 'cold-start-rl',
} as const;

/**
 * One recipe per seed that trains every arm: the teacher first (finding 1's R1-Zero, finding 2's
 * GRPO-alone arm), its rejection samples, the student's three arms, then the cold start and its
 * GRPO. Later stages name where they start (`from`), so one run folder resumes them all.
 */
export function findingsRecipe(seed: number, o: FindingsOptions = FINDINGS_DEFAULTS): Recipe {
  const grpo = (steps: number) => ({ ...o.grpo, steps, saveSteps: 10 });
  const student = `model:${o.student}`;
  return parseRecipe({
    name: 'R1 findings',
    description:
      'The R1 paper’s three findings in miniature (docs/recipe/protocol.md): R1-Zero, cold start → GRPO, and a stronger teacher distilled into a smaller student against GRPO on the student.',
    seed,
    stages: [
      {
        kind: 'grpo',
        name: STAGE.teacher,
        from: 'base',
        preset: 'aha',
        options: grpo(o.reasonerSteps),
      },
      {
        kind: 'rejection-sample',
        name: STAGE.teacherSamples,
        from: STAGE.teacher,
        preset: 'aha',
        prompts: o.teacherPrompts,
        options: { k: o.teacherK, temperature: 1 },
      },
      {
        kind: 'sft',
        name: STAGE.studentSft,
        from: student,
        data: { stage: STAGE.teacherSamples },
        // "The same student steps": the distillation's optimizer steps are at most the GRPO arm's.
        options: { maxSteps: o.studentSteps, ...o.distillSft },
      },
      { kind: 'grpo', name: STAGE.studentSftRl, preset: 'aha', options: grpo(o.studentSteps) },
      {
        kind: 'grpo',
        name: STAGE.studentRl,
        from: student,
        preset: 'aha',
        options: grpo(o.studentSteps),
      },
      {
        kind: 'sft',
        name: STAGE.coldStart,
        from: 'base',
        data: { coldStart: { count: o.coldStartCount } },
        options: o.coldStartSft,
      },
      { kind: 'grpo', name: STAGE.coldStartRl, preset: 'aha', options: grpo(o.reasonerSteps) },
    ],
  });
}

/** The models the report evaluates: the two as loaded and each stage that ends an arm. */
export const ARMS = {
  base: { model: 'reasoner', stage: null, label: 'tiny reasoner (base)' },
  r1Zero: { model: 'reasoner', stage: STAGE.teacher, label: 'R1-Zero: GRPO alone' },
  coldStart: { model: 'reasoner', stage: STAGE.coldStart, label: 'cold start only (SFT)' },
  coldStartRl: { model: 'reasoner', stage: STAGE.coldStartRl, label: 'cold start → GRPO' },
  studentBase: { model: 'student', stage: null, label: 'student (base)' },
  studentRl: { model: 'student', stage: STAGE.studentRl, label: 'student: GRPO alone' },
  studentDistill: {
    model: 'student',
    stage: STAGE.studentSft,
    label: 'student: distilled from the teacher',
  },
  studentDistillRl: {
    model: 'student',
    stage: STAGE.studentSftRl,
    label: 'student: distilled, then GRPO',
  },
} as const satisfies Record<string, { model: string; stage: string | null; label: string }>;
export type ArmId = keyof typeof ARMS;
export const ARM_IDS = Object.keys(ARMS) as ArmId[];

/** A model's held-out measurement: counts for the intervals, rates for the tables. */
export interface ArmEval {
  /** Completions scored (prompts × samples). */
  n: number;
  correct: number;
  accuracy: number;
  reflection: number;
  /** Completions that reflect (for the reflection comparison's intervals). */
  reflecting: number;
  format: number;
  /** Mean share of the chain of thought's words in the prompt's script (Latin; R1 §2.3.3); NaN
   * when no completion had a word with a letter. */
  languageConsistency: number;
  length: number;
  accuracyReflecting: number;
  accuracyNotReflecting: number;
}

export type Metric = 'accuracy' | 'reflection';

/** One comparison a finding's verdict rests on: `better` beats `worse` on `metric` in the paper. */
export interface Comparison {
  better: ArmId;
  worse: ArmId;
  metric: Metric;
}

export interface Finding {
  id: 'rl-alone' | 'cold-start' | 'distillation';
  title: string;
  /** The paper's claim, with where it says it. */
  paper: string;
  /** All must be reproduced for the finding to be. */
  comparisons: Comparison[];
  /** Reported beside the verdict, not part of it. */
  also?: Comparison[];
}

export const FINDINGS: Finding[] = [
  {
    id: 'rl-alone',
    title: 'RL alone teaches reasoning',
    paper:
      'R1 §2.2: GRPO straight on the base model, with rule rewards only, raised AIME 2024 pass@1 from 15.6% to 71.0%, and reflection emerged unprompted (the "aha moment").',
    comparisons: [
      { better: 'r1Zero', worse: 'base', metric: 'accuracy' },
      { better: 'r1Zero', worse: 'base', metric: 'reflection' },
    ],
  },
  {
    id: 'cold-start',
    title: 'A cold start helps RL',
    paper:
      'R1 §2.3.1: a few thousand long chain-of-thought examples fine-tuned before RL avoid "the early unstable cold start phase of RL", make outputs readable, and gave better performance than R1-Zero.',
    comparisons: [{ better: 'coldStartRl', worse: 'r1Zero', metric: 'accuracy' }],
    also: [{ better: 'coldStartRl', worse: 'r1Zero', metric: 'reflection' }],
  },
  {
    id: 'distillation',
    title: 'Distilling a stronger model beats RL on the small one',
    paper:
      'R1 §4.1, Table 6: Qwen-32B distilled from DeepSeek-R1 (SFT on its samples) scored 72.6% on AIME 2024 pass@1 against 47.0% for Qwen-32B trained by large-scale RL itself (over 10K steps).',
    comparisons: [{ better: 'studentDistill', worse: 'studentRl', metric: 'accuracy' }],
    also: [{ better: 'studentDistillRl', worse: 'studentDistill', metric: 'accuracy' }],
  },
];

export type Verdict = 'reproduced' | 'not reproduced' | 'inconclusive';

/** What the comparison measured of one arm on one seed, as counts. */
export interface Count {
  hits: number;
  n: number;
}

export interface ComparisonVerdict extends Comparison {
  verdict: Verdict;
  /** Seeds on which `better` was above `worse` (ties count as not). */
  seedsAgreeing: number;
  seeds: number;
  pooled: { better: WilsonInterval & Count; worse: WilsonInterval & Count };
  /** One sentence with the numbers. */
  text: string;
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
const sum = (cs: Count[]) =>
  cs.reduce((a, c) => ({ hits: a.hits + c.hits, n: a.n + c.n }), { hits: 0, n: 0 });

/**
 * The decision rule of protocol.md for one comparison. `better[i]` and `worse[i]` are seed i's
 * counts; an arm measured once for every seed (a base model: the same weights and draws) passes a
 * single count, compared with every seed and pooled once (its draws are not independent repeats).
 */
export function compareArms(
  c: Comparison,
  better: Count[],
  worse: Count[],
  labels: { better: string; worse: string } = { better: c.better, worse: c.worse },
): ComparisonVerdict {
  const seeds = Math.max(better.length, worse.length);
  if (seeds === 0 || better.length === 0 || worse.length === 0)
    throw new Error(`compareArms: no seeds for ${c.better} vs ${c.worse}`);
  const at = (cs: Count[], i: number) => (cs.length === 1 ? cs[0] : cs[i]);
  const rate = (x: Count) => (x.n ? x.hits / x.n : NaN);
  let seedsAgreeing = 0;
  for (let i = 0; i < seeds; i++) if (rate(at(better, i)) > rate(at(worse, i))) seedsAgreeing++;
  const pb = sum(better);
  const pw = sum(worse);
  const ib = { ...wilsonInterval(pb.hits, pb.n), ...pb };
  const iw = { ...wilsonInterval(pw.hits, pw.n), ...pw };
  const apart = ib.low > iw.high;
  const reversed = iw.low > ib.high;
  const verdict: Verdict =
    seedsAgreeing === seeds && apart
      ? 'reproduced'
      : reversed || seedsAgreeing === 0
        ? 'not reproduced'
        : 'inconclusive';
  const span = (x: WilsonInterval) => `${pct(x.low)}–${pct(x.high)}`;
  const numbers = `${labels.better} ${pct(rate(pb))} (${span(ib)}) vs ${labels.worse} ${pct(rate(pw))} (${span(iw)}) ${c.metric}, pooled over ${seeds} seed${seeds === 1 ? '' : 's'}`;
  const why =
    verdict === 'reproduced'
      ? `higher on every seed (${seedsAgreeing} of ${seeds}) and the pooled 95% intervals separate`
      : reversed
        ? `the pooled 95% intervals separate the other way (higher on ${seedsAgreeing} of ${seeds} seeds)`
        : seedsAgreeing === 0
          ? `higher on no seed (0 of ${seeds})`
          : seedsAgreeing < seeds
            ? `higher on ${seedsAgreeing} of ${seeds} seeds only${apart ? '' : ', and the pooled 95% intervals overlap'}`
            : `higher on every seed (${seeds} of ${seeds}) but the pooled 95% intervals overlap`;
  const word = verdict[0].toUpperCase() + verdict.slice(1);
  return {
    ...c,
    verdict,
    seedsAgreeing,
    seeds,
    pooled: { better: ib, worse: iw },
    text: `${word}: ${why}. ${numbers}.`,
  };
}

/** A finding is reproduced when each of its comparisons is; not reproduced when any is not;
 * inconclusive otherwise. */
export function findingVerdict(parts: Pick<ComparisonVerdict, 'verdict'>[]): Verdict {
  if (parts.every((p) => p.verdict === 'reproduced')) return 'reproduced';
  if (parts.some((p) => p.verdict === 'not reproduced')) return 'not reproduced';
  return 'inconclusive';
}

/** An arm's counts on `metric` (reflection: reflecting completions of n). */
export const countOf = (e: ArmEval, metric: Metric): Count => ({
  hits: metric === 'accuracy' ? e.correct : e.reflecting,
  n: e.n,
});

/** The training accuracy a "steps to reach" counts up to, and the moving window it is read on
 * (a step's accuracy is 32 completions: one step alone is too noisy). protocol.md. */
export const REACH_ACCURACY = 0.4;
export const REACH_WINDOW = 10;

/**
 * The first GRPO step at which the mean training accuracy of the last `window` steps is at least
 * `threshold` (steps before `window` average what there is), or null when no step reaches it.
 */
export function stepsToReach(
  accuracy: readonly number[],
  threshold = REACH_ACCURACY,
  window = REACH_WINDOW,
): number | null {
  const i = movingMean(accuracy, window).findIndex((m) => m >= threshold);
  return i < 0 ? null : i + 1;
}

/** The moving mean of `xs` over the last `window` values (what stepsToReach reads; the plots). */
export const movingMean = (xs: readonly number[], window = REACH_WINDOW): number[] =>
  xs.map((_, i) => {
    const s = xs.slice(Math.max(0, i - window + 1), i + 1).filter(Number.isFinite);
    return s.length ? s.reduce((a, b) => a + b, 0) / s.length : NaN;
  });

/** The findings file the command writes (docs/recipe/findings.json) and the Paper view reads. */
export interface FindingsReport {
  version: 1;
  command: string;
  durationSeconds: number;
  machine: { cpu: string; cores: number; adapter: string };
  promptSet: string;
  heldOutPrompts: number;
  samplesPerPrompt: number;
  seeds: number[];
  options: FindingsOptions;
  /** Measured once: the models as loaded. */
  base: ArmEval;
  studentBase: ArmEval;
  /** Per seed, the trained arms' held-out numbers. */
  perSeed: {
    seed: number;
    seconds: number;
    arms: Partial<Record<ArmId, ArmEval>>;
    /** GRPO steps to REACH_ACCURACY (moving mean of training accuracy), null: not within. */
    stepsToReach: { r1Zero: number | null; coldStartRl: number | null };
    /** Teacher samples kept of sampled. */
    teacherSamples: { sampled: number; kept: number };
    /** Seconds each stage took (evaluations apart), by stage name. */
    stageSeconds: Record<string, number>;
    /** Optimizer steps of the cold start and of the distillation (SFT). */
    sftSteps: { coldStart: number; distill: number };
    /** Training accuracy by GRPO step of each GRPO stage (the plots). */
    curves: Partial<Record<ArmId, number[]>>;
  }[];
  findings: {
    id: Finding['id'];
    title: string;
    paper: string;
    verdict: Verdict;
    comparisons: ComparisonVerdict[];
    also: ComparisonVerdict[];
  }[];
}

/** Every finding's verdict from the measured arms. */
export function judgeFindings(
  base: { base: ArmEval; studentBase: ArmEval },
  perSeed: FindingsReport['perSeed'],
): FindingsReport['findings'] {
  const counts = (arm: ArmId, metric: Metric): Count[] =>
    arm === 'base' || arm === 'studentBase'
      ? [countOf(base[arm], metric)]
      : perSeed.map((s) => {
          const e = s.arms[arm];
          if (!e) throw new Error(`seed ${s.seed}: arm '${arm}' was not measured`);
          return countOf(e, metric);
        });
  const judge = (c: Comparison) =>
    compareArms(c, counts(c.better, c.metric), counts(c.worse, c.metric), {
      better: ARMS[c.better].label,
      worse: ARMS[c.worse].label,
    });
  return FINDINGS.map((f) => {
    const comparisons = f.comparisons.map(judge);
    return {
      id: f.id,
      title: f.title,
      paper: f.paper,
      verdict: findingVerdict(comparisons),
      comparisons,
      also: (f.also ?? []).map(judge),
    };
  });
}
