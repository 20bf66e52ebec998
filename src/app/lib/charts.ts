// Which metrics the Train view charts, grouped the way the issue lists them (docs/grpo.md §6
// names), and what values each can take (its y axis shows no more: lib/chart-rules.ts).
import type { YKind } from './chart-rules';

export interface ChartSeries {
  key: string;
  label: string;
}

export interface ChartSpec {
  id: string;
  title: string;
  help: string;
  /** Where the quantity is explained (a Learn section or the Aha view), or null. */
  learn: string | null;
  series: ChartSeries[];
  /** Rates and shares in [0, 1]; lengths, norms, KL, entropy, speed ≥ 0; reward and loss any. */
  yKind: YKind;
}

export function chartSpecs(rewardNames: readonly string[]): ChartSpec[] {
  return [
    {
      id: 'reward',
      yKind: 'any',
      title: 'Reward',
      help: 'Mean total reward of the step, and each reward function’s mean.',
      learn: '#learn/rewards',
      series: [
        { key: 'reward', label: 'total' },
        ...rewardNames.map((n) => ({ key: `rewards/${n}/mean`, label: n })),
      ],
    },
    {
      id: 'accuracy',
      yKind: 'rate',
      title: 'Accuracy & format',
      help: 'Share of completions with a correct answer, and with the <think>…<answer> format.',
      learn: '#learn/rewards',
      series: [
        { key: 'accuracy', label: 'accuracy' },
        { key: 'format_rate', label: 'format' },
      ],
    },
    {
      id: 'length',
      yKind: 'nonneg',
      title: 'Completion length',
      help: 'Tokens per completion: mean, shortest and longest of the step.',
      learn: '#aha',
      series: [
        { key: 'completions/mean_length', label: 'mean' },
        { key: 'completions/min_length', label: 'min' },
        { key: 'completions/max_length', label: 'max' },
      ],
    },
    {
      id: 'truncated',
      yKind: 'rate',
      title: 'Truncated share',
      help: 'Completions that hit maxCompletionLength without ending.',
      learn: '#learn/loss-types',
      series: [{ key: 'completions/clipped_ratio', label: 'truncated' }],
    },
    {
      id: 'kl',
      yKind: 'nonneg',
      title: 'KL to reference',
      help: 'Mean k3 estimate of KL(π_θ ‖ π_ref); only computed when β > 0.',
      learn: '#learn/kl',
      series: [{ key: 'kl', label: 'kl' }],
    },
    {
      id: 'entropy',
      yKind: 'nonneg',
      title: 'Entropy',
      help: 'Mean per-token entropy of the policy on its own samples: falls as it grows confident.',
      learn: null,
      series: [{ key: 'entropy', label: 'entropy' }],
    },
    {
      id: 'clip',
      yKind: 'rate',
      title: 'Clip ratios',
      help: 'Share of tokens whose ratio was clipped below 1 − ε, above 1 + ε_high, or either.',
      learn: '#learn/clipping',
      series: [
        { key: 'clip_ratio/low_mean', label: 'low' },
        { key: 'clip_ratio/high_mean', label: 'high' },
        { key: 'clip_ratio/region_mean', label: 'region' },
      ],
    },
    {
      id: 'loss',
      yKind: 'any',
      title: 'Loss',
      help: 'The GRPO objective as minimised (its value is not a progress measure; the reward is).',
      learn: '#learn/loss-types',
      series: [{ key: 'loss', label: 'loss' }],
    },
    {
      id: 'grad_norm',
      yKind: 'nonneg',
      title: 'Gradient norm',
      help: 'Global L2 norm of the gradient before clipping to maxGradNorm.',
      learn: '#learn/update',
      series: [{ key: 'grad_norm', label: '‖g‖' }],
    },
    {
      id: 'reflection',
      yKind: 'rate',
      title: 'Reflection rate',
      help: 'Share of completions with a reflection marker (“wait”, “recheck”, “check again” …).',
      learn: '#aha',
      series: [{ key: 'reflection_rate', label: 'reflecting' }],
    },
    {
      id: 'tokens_per_second',
      yKind: 'nonneg',
      title: 'Tokens / s',
      help: 'Completion tokens sampled per second (sampling phase only).',
      learn: null,
      series: [{ key: 'tokens_per_second', label: 'tok/s' }],
    },
  ];
}
