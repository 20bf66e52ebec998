// Which chat messages are task problems (scored by the task's verifier) and which are free text.
import { describe, expect, it } from 'vitest';
import { problemForMessage } from '../../src/tasks/chat-problem';
import { createCountdownTask, countdownQuestion } from '../../src/tasks/countdown';
import { createArithmeticTask } from '../../src/tasks/arithmetic';
import { createJsonlTask } from '../../src/tasks/jsonl';
import type { Problem } from '../../src/tasks/types';

describe('problemForMessage', () => {
  const countdown = createCountdownTask();
  it('a known problem, with other whitespace and a trailing period, is that problem', () => {
    const [p] = countdown.generate(3, 1);
    const typed = `  ${p.question.replace(/ /g, '  ')}.\n`;
    expect(problemForMessage(typed, countdown, [p])).toBe(p);
  });

  it("a countdown problem in the task's words is scored by the countdown verifier", () => {
    const p = problemForMessage(
      'Using the numbers [3, 5, 7], create an equation that equals 15',
      countdown,
      [],
    )!;
    expect(p.verifier).toEqual({ kind: 'countdown', nums: [3, 5, 7], target: 15 });
    expect(countdown.verify('3 + 5 + 7', p)).toBe(true);
    expect(countdown.verify('3 * 5 + 7', p)).toBe(false);
    // The full generated wording parses the same way.
    const q = problemForMessage(countdownQuestion([2, 9, 4], 22), countdown, [])!;
    expect(q.verifier).toEqual({ kind: 'countdown', nums: [2, 9, 4], target: 22 });
  });

  it('an imported Countdown-Tasks set (task jsonl) scores countdown problems in its words', () => {
    const set = createJsonlTask('{"nums": [3, 8, 2], "target": 22}\n');
    const known = set.dataset.problems;
    const p = problemForMessage(
      'Using the numbers [5, 7, 3], create an equation that equals 8',
      set,
      known,
    );
    expect(p?.verifier).toEqual({ kind: 'countdown', nums: [5, 7, 3], target: 8 });
    expect(p?.task).toBe('jsonl');
    const plain = createJsonlTask('{"prompt": "2+2?", "answer": "4"}\n');
    expect(
      problemForMessage(
        'Using the numbers [5, 7, 3], create an equation that equals 8',
        plain,
        plain.dataset.problems,
      ),
    ).toBeNull();
  });

  it('arithmetic: the reference is computed exactly', () => {
    const task = createArithmeticTask();
    const p = problemForMessage('Compute 123456789012 * 1000', task, [])!;
    expect(p.reference).toBe('123456789012000');
    expect(task.verify('123456789012000', p)).toBe(true);
    expect(problemForMessage('compute 7 - 12', task, [])!.reference).toBe('-5');
  });

  it('free text, or another task’s wording, is not a problem', () => {
    const known: Problem[] = countdown.generate(1, 2);
    expect(problemForMessage('hello there', countdown, known)).toBeNull();
    expect(problemForMessage('   ', countdown, known)).toBeNull();
    expect(problemForMessage('Compute 2 + 2', countdown, known)).toBeNull();
    expect(
      problemForMessage(
        'Using the numbers [1, 2], create an equation that equals 3',
        createArithmeticTask(),
        [],
      ),
    ).toBeNull();
  });
});
