// Which task problem a chat message asks, if any, so the chat box can score the reply with the
// task's own verifier: a message that is one of the run's problems (its question, as the
// inspector and the held-out list show it), or that states a countdown or arithmetic problem in
// the task's own words ("Using the numbers [3, 5, 7], create an equation that equals 15",
// "Compute 12 + 30"), also for an imported dataset in the Countdown-Tasks layout (task 'jsonl'
// whose problems are countdown ones). Anything else is free text and is not scored.
import type { Problem, Task } from './types';
import { asciiTrim } from './verify';

/** Whitespace collapsed, a trailing period dropped: how two statements of a question compare. */
function normalise(text: string): string {
  return asciiTrim(text)
    .replace(/[ \t\n\v\f\r]+/g, ' ')
    .replace(/\.$/, '');
}

const COUNTDOWN_RE =
  /using the numbers \[([0-9][0-9, ]*)\],? create an equation that equals (-?[0-9]+)/i;
const ARITHMETIC_RE = /compute (-?[0-9]+) ([+*-]) (-?[0-9]+)/i;
/** Numbers beyond this are not a generated task's (keeps BigInt and the verifier bounded). */
const MAX_DIGITS = 30;

export function problemForMessage(
  message: string,
  task: Pick<Task, 'name'>,
  known: readonly Problem[],
): Problem | null {
  const text = normalise(message);
  if (!text) return null;
  const exact = known.find((p) => normalise(p.question) === text);
  if (exact) return exact;
  // An imported Countdown-Tasks set (src/tasks/datasets) states its problems in the same words.
  const countdownSet =
    task.name === 'jsonl' &&
    known.length > 0 &&
    known.every((p) => p.verifier.kind === 'countdown');
  if (task.name === 'countdown' || countdownSet) {
    const m = COUNTDOWN_RE.exec(text);
    if (!m) return null;
    const nums = m[1]
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map(Number);
    const target = Number(m[2]);
    if (
      nums.length === 0 ||
      nums.some((n) => !Number.isSafeInteger(n)) ||
      !Number.isSafeInteger(target)
    )
      return null;
    return {
      id: 'chat',
      task: task.name,
      question: message,
      reference: null,
      verifier: { kind: 'countdown', nums, target },
    };
  }
  if (task.name === 'arithmetic') {
    const m = ARITHMETIC_RE.exec(text);
    if (!m || m[1].length > MAX_DIGITS || m[3].length > MAX_DIGITS) return null;
    const a = BigInt(m[1]);
    const b = BigInt(m[3]);
    const answer = String(m[2] === '+' ? a + b : m[2] === '-' ? a - b : a * b);
    return {
      id: 'chat',
      task: 'arithmetic',
      question: message,
      reference: answer,
      verifier: { kind: 'integer', answer },
    };
  }
  return null;
}
