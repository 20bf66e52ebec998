// The Paper view's figures and links: DeepSeek-R1-Zero's two training curves from the DeepSeek-R1
// paper (arXiv 2501.12948, v1), as points read off its Figure 2 (AIME 2024 pass@1 during RL) and
// Figure 3 (average response length on the training set during RL). Only the end points of the
// accuracy curve are numbers the paper states (15.6% → 71.0%, §2.2.4); every other point is an
// approximate reading of the plotted line, rounded, and smooths over its step-to-step noise. The
// view's captions say so. Plain data, nothing fetched: the page works offline.

export interface FigurePoint {
  /** RL training step. */
  x: number;
  y: number;
}

/** Figure 2: R1-Zero's AIME 2024 pass@1 (16 samples per question), as a fraction. */
export const AIME_PASS1: readonly FigurePoint[] = [
  { x: 0, y: 0.156 },
  { x: 500, y: 0.22 },
  { x: 1000, y: 0.29 },
  { x: 1500, y: 0.35 },
  { x: 2000, y: 0.41 },
  { x: 2500, y: 0.45 },
  { x: 3000, y: 0.49 },
  { x: 3500, y: 0.52 },
  { x: 4000, y: 0.56 },
  { x: 4500, y: 0.58 },
  { x: 5000, y: 0.61 },
  { x: 5500, y: 0.63 },
  { x: 6000, y: 0.65 },
  { x: 6500, y: 0.67 },
  { x: 7000, y: 0.68 },
  { x: 7500, y: 0.7 },
  { x: 8000, y: 0.71 },
];

/** Table 2: R1-Zero's AIME 2024 accuracy with majority voting over 64 samples (cons@64). */
export const AIME_CONS64 = 0.867;

/** Figure 3: R1-Zero's average response length on the training set, in tokens. */
export const RESPONSE_LENGTH: readonly FigurePoint[] = [
  { x: 0, y: 300 },
  { x: 500, y: 700 },
  { x: 1000, y: 1100 },
  { x: 1500, y: 1600 },
  { x: 2000, y: 2100 },
  { x: 2500, y: 2700 },
  { x: 3000, y: 3300 },
  { x: 3500, y: 3900 },
  { x: 4000, y: 4500 },
  { x: 4500, y: 5200 },
  { x: 5000, y: 5900 },
  { x: 5500, y: 6600 },
  { x: 6000, y: 7300 },
  { x: 6500, y: 8000 },
  { x: 7000, y: 8600 },
  { x: 7500, y: 9300 },
  { x: 8000, y: 9900 },
];

/** The papers the Paper view cites, linked by their arXiv abstract page. */
export const PAPER_LINKS: readonly { arxiv: string; title: string; what: string }[] = [
  {
    arxiv: '2501.12948',
    title:
      'DeepSeek-R1: Incentivizing Reasoning Capability in LLMs via Reinforcement Learning (DeepSeek-AI, 2025)',
    what: 'R1-Zero, the template, the rule rewards, the aha moment, the curves above',
  },
  {
    arxiv: '2402.03300',
    title:
      'DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models (Shao et al., 2024)',
    what: 'where GRPO was introduced',
  },
  {
    arxiv: '2503.14476',
    title: 'DAPO: An Open-Source LLM Reinforcement Learning System at Scale (Yu et al., 2025)',
    what: 'ε_high above ε_low, token-level loss, no KL term',
  },
  {
    arxiv: '2503.20783',
    title: 'Understanding R1-Zero-Like Training: A Critical Perspective (Liu et al., 2025)',
    what: 'Dr. GRPO: the length and std biases',
  },
];
