// Learn's ✓ / ✗ checks, pass by pass (docs/grpo.md §3, §6). With μ = numIterations > 1 the logged
// `loss` is the mean of the μ passes' losses and the logged clip ratios and kl average every pass's
// micro-batches, so a recomputation from one pass's log-probs may only be set beside that same
// pass's trainer value. Each CheckLine holds the two numbers the view prints and the verdict it
// prints between them; the verdict is `matches` of exactly those two numbers, nothing else.
// Pure: the view lays the lines out, tests/unit/learn-checks.test.ts walks the settings.
import type { CompletionRecord, PassRecord, StepReport } from '../../grpo/trainer';
import { allCompletions, matches, stepLoss, type LearnConfig, type StepLoss } from './derive';
import type { Config } from '../../grpo/config';

/** What a pass-by-pass recomputation reads (a resolved Config has them all). */
export type CheckConfig = Pick<
  LearnConfig,
  | 'epsilon'
  | 'epsilonHigh'
  | 'beta'
  | 'lossType'
  | 'numIterations'
  | 'maxCompletionLength'
  | 'gradientAccumulationSteps'
> &
  Partial<
    Pick<
      Config,
      | 'importanceSamplingLevel'
      | 'delta'
      | 'sapoTemperaturePos'
      | 'sapoTemperatureNeg'
      | 'topEntropyQuantile'
    >
  >;

export type CheckKey = 'loss' | 'clip' | 'kl';

export interface CheckLine {
  key: CheckKey;
  /** What is compared: 'loss', 'clipped (any side)', 'mean k3'. */
  label: string;
  /** The trainer's value of this pass, the one printed as "trainer …". */
  trainer: number;
  /** Recomputed from this pass's log-probs in the report, null when the report cannot. */
  recomputed: number | null;
  /** matches(recomputed, trainer); null when there is nothing recomputed to compare. */
  ok: boolean | null;
  /** How both numbers are printed: 'loss' six decimals, 'ratio' a percentage. */
  unit: 'loss' | 'ratio';
}

export interface PassCheck {
  /** 1-based pass number, and μ. */
  pass: number;
  of: number;
  /** "pass 2 of 2", or "" with μ = 1 (there is only the one pass to name). */
  name: string;
  lines: CheckLine[];
  /** Why nothing is recomputed for this pass (null when the lines carry recomputed values). */
  notRecomputed: string | null;
}

/** The trainer's numbers of every pass the report describes. */
export function trainerPasses(report: StepReport, config: Pick<CheckConfig, 'beta'>): PassRecord[] {
  if (report.passes && report.passes.length > 0) return report.passes;
  // A report older than StepReport.passes: only the first pass's figures are in the metrics
  // (first_pass/*; before those, at μ = 1, the logged values were the only pass's).
  const m = report.metrics;
  const first = (key: string) => m[`first_pass/${key}`] ?? m[key];
  return [
    {
      loss: first('loss'),
      clipRatioLow: first('clip_ratio/low_mean'),
      clipRatioHigh: first('clip_ratio/high_mean'),
      clipRatioRegion: first('clip_ratio/region_mean'),
      kl: config.beta > 0 ? (first('kl') ?? null) : null,
      gradNorm: m.grad_norm,
      learningRate: m.learning_rate,
    },
  ];
}

/** The report's completions as pass `pass` (1-based) scored them, or null when it lacks them. */
export function completionsOfPass(report: StepReport, pass: number): CompletionRecord[] | null {
  const all = allCompletions(report);
  if (pass === 1) return all;
  const out: CompletionRecord[] = [];
  for (const c of all) {
    const logp = c.laterPassLogp?.[pass - 2];
    if (!logp || logp.length !== c.logp.length) return null;
    out.push({ ...c, logp });
  }
  return out;
}

/** The step's loss and statistics recomputed from the log-probs pass `pass` scored. */
export function passLoss(report: StepReport, config: CheckConfig, pass: number): StepLoss | null {
  const completions = completionsOfPass(report, pass);
  if (!completions || completions.length === 0) return null;
  const groups = [{ ...report.groups[0], completions }];
  return stepLoss({ ...report, groups }, config, config.lossType);
}

/** Why the report's numbers cannot be recomputed under these settings (null: they can). */
export function cannotRecompute(config: CheckConfig): string | null {
  if ((config.topEntropyQuantile ?? 1) < 1)
    return 'not recomputed here: the loss of topEntropyQuantile < 1 needs the tokens’ entropies, which the report does not carry';
  return null;
}

function line(
  key: CheckKey,
  label: string,
  unit: CheckLine['unit'],
  trainer: number,
  recomputed: number | null,
): CheckLine {
  return {
    key,
    label,
    unit,
    trainer,
    recomputed,
    ok: recomputed === null ? null : matches(recomputed, trainer),
  };
}

/**
 * One PassCheck per pass of the update: the trainer's loss, clip ratio (any side) and, with β > 0,
 * mean k3 of that pass, each beside the same figure recomputed from that pass's log-probs.
 */
export function passChecks(report: StepReport, config: CheckConfig): PassCheck[] {
  const passes = trainerPasses(report, config);
  const of = Math.max(config.numIterations, passes.length);
  const blocked = cannotRecompute(config);
  return passes.map((p, k) => {
    const pass = k + 1;
    const r = blocked ? null : passLoss(report, config, pass);
    const lines = [
      line('loss', 'loss', 'loss', p.loss, r ? r.loss : null),
      line(
        'clip',
        'clipped (any side)',
        'ratio',
        p.clipRatioRegion,
        r ? r.stats.clipRatioRegion : null,
      ),
    ];
    if (config.beta > 0 && p.kl !== null) {
      const hasRef = allCompletions(report).every((c) => c.refLogp !== null);
      lines.push(line('kl', 'mean k3', 'loss', p.kl, r && hasRef ? r.stats.meanKl : null));
    }
    return {
      pass,
      of,
      name: of > 1 ? `pass ${pass} of ${of}` : '',
      lines,
      notRecomputed:
        blocked ?? (r === null ? `this report does not carry pass ${pass}’s log-probs` : null),
    };
  });
}

/** Every verdict of the checks (for a summary): true only when each compared line matches. */
export function allMatch(checks: readonly PassCheck[]): boolean {
  return checks.every((c) => c.lines.every((l) => l.ok !== false));
}

// ---------------------------------------------------------------------------------------------
// Inspect's Clipped mode (docs/grpo.md §3): which ratio its marks come from, and their check
// ---------------------------------------------------------------------------------------------

export interface ClipMarks {
  /**
   * 'pass': the marks are the tokens the last pass's loss clipped (μ > 1, its log-probs in the
   * report); 'after': the log-probs after the update, the tokens a further pass would clip
   * (μ = 1); 'none': the report has neither, so nothing can be marked.
   */
  source: 'pass' | 'after' | 'none';
  /** The pass the marks are (μ for 'pass'), and μ. */
  pass: number;
  of: number;
  /** Per group, per completion, per token: 1 clipped, 0 not, null not counted. */
  values: (number | null)[][][];
  clipped: number;
  counted: number;
  /**
   * With 'pass' and per-token ratios of the clipped surrogate: the trainer's clip ratio of that
   * pass and whether the marks' share equals it; null where the two are not the same quantity.
   */
  trainer: number | null;
  ok: boolean | null;
}

/** Whether the clipped surrogate zeroes a token's gradient at ratio ρ (docs/grpo.md §3). */
function clippedAt(rho: number, a: number, epsLow: number, epsHigh: number): boolean {
  return (a > 0 && rho > 1 + epsHigh) || (a < 0 && rho < 1 - epsLow);
}

export function clipMarks(report: StepReport, config: CheckConfig): ClipMarks {
  const of = config.numIterations;
  const last = of > 1 ? completionsOfPass(report, of) : null;
  const all = allCompletions(report);
  const hasAfter = all.length > 0 && all.every((c) => c.logpAfter !== null);
  const source: ClipMarks['source'] = last ? 'pass' : hasAfter ? 'after' : 'none';
  let clipped = 0;
  let counted = 0;
  let i = 0;
  const values = report.groups.map((g) =>
    g.completions.map((c) => {
      const lp = source === 'pass' ? last![i].logp : source === 'after' ? c.logpAfter! : null;
      i++;
      return c.tokens.map((_, t) => {
        if (!c.counted[t]) return null;
        if (!lp) return 0;
        const hit = clippedAt(
          Math.exp(lp[t] - c.oldLogp[t]),
          c.advantage,
          config.epsilon,
          config.epsilonHigh,
        );
        counted++;
        if (hit) clipped++;
        return hit ? 1 : 0;
      });
    }),
  );
  // The trainer's region ratio is the share of counted tokens its clip flags; the same quantity
  // as the marks only for the per-token clipped surrogate (not GSPO's one ratio per completion,
  // CISPO's cap, SAPO's gate or δ's extra cap).
  const comparable =
    source === 'pass' &&
    ['grpo', 'bnpo', 'dr_grpo', 'dapo'].includes(config.lossType) &&
    config.importanceSamplingLevel !== 'sequence' &&
    (config.delta ?? null) === null;
  const trainer = comparable ? (report.passes?.[of - 1]?.clipRatioRegion ?? null) : null;
  return {
    source,
    pass: source === 'pass' ? of : 1,
    of,
    values,
    clipped,
    counted,
    trainer,
    ok: trainer === null ? null : matches(counted ? clipped / counted : 0, trainer),
  };
}
