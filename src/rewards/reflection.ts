// Reflection ("aha") measurement, docs/grpo.md §7, after oat-zero: a completion reflects when its
// think text contains a reflection marker (case-insensitive, whole words). The per-step summary
// pairs the reflection rate with the accuracy of reflecting vs non-reflecting completions, because
// the aha claim is "reflection rises AND reflecting completions are right more often", never length
// alone.

/** oat-zero's self-reflection keywords, as listed in docs/grpo.md §7. */
export const DEFAULT_REFLECTION_MARKERS = [
  'wait',
  'recheck',
  'rethink',
  'try again',
  're-evaluate',
  'check again',
  're-examine',
] as const;

export interface MarkerHit {
  marker: string;
  index: number; // UTF-16 offset in the searched text
  length: number;
}

function markerSource(marker: string): string {
  const words = marker.trim().split(/\s+/).filter(Boolean);
  if (words.length === 0) throw new RangeError('empty reflection marker');
  return words
    .map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/'/g, "['\u2019]"))
    .join('[ \\t\\n\\v\\f\\r]+');
}

/** Word boundary by lookaround (not \b), so markers that start or end with punctuation still work. */
export function markerRegex(markers: readonly string[]): RegExp {
  if (markers.length === 0) throw new RangeError('no reflection markers');
  // Longest first, so "check again" wins over a shorter marker at the same position.
  const sorted = [...new Set(markers)].sort((a, b) => b.length - a.length);
  return new RegExp(
    `(?<![A-Za-z0-9_])(?:${sorted.map(markerSource).join('|')})(?![A-Za-z0-9_])`,
    'gi',
  );
}

/** Default markers plus the task's own (e.g. Countdown's backtracking phrases). */
export function reflectionMarkers(taskMarkers: readonly string[] = []): string[] {
  return [...DEFAULT_REFLECTION_MARKERS, ...taskMarkers];
}

/**
 * The reasoning part of a completion: inside the first <think>…</think> (to the end when unclosed);
 * everything before </think> when the prompt already opened the tag; otherwise everything before
 * the first <answer> (a completion without tags still has reasoning to search).
 */
export function thinkText(completion: string): string {
  const open = completion.indexOf('<think>');
  if (open >= 0) {
    const start = open + '<think>'.length;
    const close = completion.indexOf('</think>', start);
    return completion.slice(start, close >= 0 ? close : undefined);
  }
  const close = completion.indexOf('</think>');
  if (close >= 0) return completion.slice(0, close);
  const answer = completion.indexOf('<answer>');
  return answer >= 0 ? completion.slice(0, answer) : completion;
}

export function findReflectionMarkers(
  text: string,
  markers: readonly string[] = DEFAULT_REFLECTION_MARKERS,
): MarkerHit[] {
  const hits: MarkerHit[] = [];
  for (const m of text.matchAll(markerRegex(markers))) {
    hits.push({ marker: m[0], index: m.index ?? 0, length: m[0].length });
  }
  return hits;
}

export function reflects(
  thinkTextValue: string,
  markers: readonly string[] = DEFAULT_REFLECTION_MARKERS,
): boolean {
  const re = markerRegex(markers);
  return re.test(thinkTextValue);
}

export interface ReflectionItem {
  completion: string;
  /** Accuracy reward of the completion: true/false, null when not applicable. */
  correct: boolean | null;
  /** Completion length in tokens. */
  length: number;
}

export interface ReflectionGroupStats {
  count: number;
  accuracy: number; // over items with a verdict; NaN when none
  meanLength: number; // NaN when count = 0
}

export interface ReflectionSummary {
  reflectionRate: number; // NaN for an empty step
  reflecting: ReflectionGroupStats;
  notReflecting: ReflectionGroupStats;
}

function groupOf(items: readonly ReflectionItem[]): ReflectionGroupStats {
  let judged = 0;
  let right = 0;
  let len = 0;
  for (const it of items) {
    len += it.length;
    if (it.correct !== null) {
      judged++;
      if (it.correct) right++;
    }
  }
  return {
    count: items.length,
    accuracy: judged > 0 ? right / judged : NaN,
    meanLength: items.length > 0 ? len / items.length : NaN,
  };
}

export function reflectionSummary(
  items: readonly ReflectionItem[],
  markers: readonly string[] = DEFAULT_REFLECTION_MARKERS,
): ReflectionSummary {
  const re = markerRegex(markers);
  const yes: ReflectionItem[] = [];
  const no: ReflectionItem[] = [];
  for (const it of items) {
    re.lastIndex = 0;
    (re.test(thinkText(it.completion)) ? yes : no).push(it);
  }
  return {
    reflectionRate: items.length > 0 ? yes.length / items.length : NaN,
    reflecting: groupOf(yes),
    notReflecting: groupOf(no),
  };
}

/** Flat metric names for the step log. */
export function reflectionMetrics(s: ReflectionSummary): Record<string, number> {
  return {
    reflection_rate: s.reflectionRate,
    'reflection/accuracy_reflecting': s.reflecting.accuracy,
    'reflection/accuracy_not_reflecting': s.notReflecting.accuracy,
    'reflection/mean_length_reflecting': s.reflecting.meanLength,
    'reflection/mean_length_not_reflecting': s.notReflecting.meanLength,
    'reflection/count_reflecting': s.reflecting.count,
    'reflection/count_not_reflecting': s.notReflecting.count,
  };
}
