// Reflection markers and the per-step aha summary (docs/grpo.md §7).
import { describe, expect, it } from 'vitest';
import {
  findReflectionMarkers,
  reflectionMarkers,
  reflectionMetrics,
  reflectionSummary,
  reflects,
  thinkText,
} from '../../src/rewards/reflection';
import { COUNTDOWN_REFLECTION_MARKERS } from '../../src/tasks/countdown';

describe('markers', () => {
  it.each([
    ['Wait, that is wrong', true],
    ['WAIT.', true],
    ['let me recheck', true],
    ['I should re-evaluate this', true],
    ['Let me try\n  again', true], // "try again" across whitespace
    ['check again', true],
    ['Re-examine the sum', true],
    ['awaiting input', false], // word boundary
    ['waited', false],
    ['unwaitable', false],
    ['rechecking', false],
    ['try  agai', false],
    ['', false],
  ])('%j → %s', (text, expected) => {
    expect(reflects(text)).toBe(expected);
  });

  it('adds task markers, with either apostrophe', () => {
    const markers = reflectionMarkers(COUNTDOWN_REFLECTION_MARKERS);
    expect(reflects("44 + 19 doesn't work", markers)).toBe(true);
    expect(reflects('44 + 19 doesn\u2019t work', markers)).toBe(true);
    expect(reflects("44 + 19 doesn't work")).toBe(false);
    expect(
      findReflectionMarkers('Wait. Let me try again, wait', markers).map((h) => [
        h.marker,
        h.index,
      ]),
    ).toEqual([
      ['Wait', 0],
      ['Let me try', 6],
      ['wait', 24],
    ]);
  });
});

describe('thinkText', () => {
  it('takes the think block, or what precedes </think> or <answer>', () => {
    expect(thinkText('<think>a wait b</think><answer>wait</answer>')).toBe('a wait b');
    expect(thinkText('<think>unclosed wait')).toBe('unclosed wait');
    expect(thinkText('prefilled wait</think><answer>1</answer>')).toBe('prefilled wait');
    expect(thinkText('plain wait <answer>1</answer>')).toBe('plain wait ');
    expect(thinkText('no tags at all')).toBe('no tags at all');
  });
});

describe('reflectionSummary', () => {
  it('splits accuracy and length by reflection (hand-worked)', () => {
    const s = reflectionSummary([
      { completion: '<think>wait, redo</think><answer>1</answer>', correct: true, length: 30 },
      { completion: '<think>Let me recheck</think><answer>1</answer>', correct: false, length: 50 },
      { completion: '<think>rethink</think><answer>1</answer>', correct: null, length: 10 },
      { completion: '<think>easy</think><answer>wait</answer>', correct: false, length: 8 }, // marker only in the answer
      { completion: '<think>direct</think><answer>1</answer>', correct: true, length: 12 },
    ]);
    expect(s.reflectionRate).toBe(0.6);
    expect(s.reflecting).toEqual({ count: 3, accuracy: 0.5, meanLength: 30 });
    expect(s.notReflecting).toEqual({ count: 2, accuracy: 0.5, meanLength: 10 });
    const m = reflectionMetrics(s);
    expect(m.reflection_rate).toBe(0.6);
    expect(m['reflection/accuracy_reflecting']).toBe(0.5);
    expect(m['reflection/mean_length_not_reflecting']).toBe(10);
  });

  it('gives NaN for empty groups', () => {
    const s = reflectionSummary([{ completion: 'x', correct: true, length: 3 }]);
    expect(s.reflectionRate).toBe(0);
    expect(s.reflecting.accuracy).toBeNaN();
    expect(s.reflecting.meanLength).toBeNaN();
    expect(s.notReflecting).toEqual({ count: 1, accuracy: 1, meanLength: 3 });
    expect(reflectionSummary([]).reflectionRate).toBeNaN();
  });
});
