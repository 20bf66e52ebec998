// Language consistency (DeepSeek-R1 §2.3.3): "the proportion of target language words in the CoT".
// R1 added it as a reward because RL on multilingual prompts made the chain of thought switch
// languages mid-sentence. A model's language is approximated here by its script, which is what a
// tokenizer-agnostic rule can check without a language-identification model: a word (a maximal run
// of letters, marks, digits, apostrophes and hyphens) counts when it has at least one letter, and
// it is "in the target language" when every letter of it belongs to the target script. Words
// without letters (numbers, arithmetic) say nothing about the language and are left out, so a
// think text of pure arithmetic scores null ("not applicable", docs/grpo.md §1), not 0 or 1.
import { thinkText } from './reflection';

/** Scripts a user can ask for, by Unicode Script property name (the \p{Script=…} value). */
export const LANGUAGE_SCRIPTS = [
  'Latin',
  'Han',
  'Cyrillic',
  'Arabic',
  'Devanagari',
  'Greek',
  'Hangul',
  'Hiragana',
  'Katakana',
  'Hebrew',
  'Thai',
] as const;
export type LanguageScript = (typeof LANGUAGE_SCRIPTS)[number];

/** The character classes of a word and of a letter (the TRL export's rewards.py gets their code
 * point ranges from these very patterns, so its Python mirror agrees character for character). */
export const WORD_CHAR_CLASS = "[\\p{L}\\p{M}\\p{Nd}'’-]";
export const LETTER_CLASS = '\\p{L}';
const WORD = new RegExp(`${WORD_CHAR_CLASS}+`, 'gu');
const LETTER = new RegExp(LETTER_CLASS, 'gu');

// Japanese text mixes Han, Hiragana and Katakana in one word; each of them alone is a script of
// its own, so a Japanese target accepts the three (and Chinese, Han alone).
const SCRIPT_SETS: Record<LanguageScript, readonly string[]> = {
  Latin: ['Latin'],
  Han: ['Han'],
  Cyrillic: ['Cyrillic'],
  Arabic: ['Arabic'],
  Devanagari: ['Devanagari'],
  Greek: ['Greek'],
  Hangul: ['Hangul'],
  Hiragana: ['Hiragana', 'Katakana', 'Han'],
  Katakana: ['Katakana', 'Hiragana', 'Han'],
  Hebrew: ['Hebrew'],
  Thai: ['Thai'],
};

/** The pattern (a 'u'-flag alternation) of one character in `script`'s set. */
export function scriptClass(script: LanguageScript): string {
  return `(?:${SCRIPT_SETS[script].map((s) => `\\p{Script=${s}}`).join('|')})`;
}

const scriptTests = new Map<LanguageScript, RegExp>();
function inScript(script: LanguageScript): RegExp {
  let re = scriptTests.get(script);
  if (!re) {
    re = new RegExp(`^${scriptClass(script)}$`, 'u');
    scriptTests.set(script, re);
  }
  return re;
}

export interface LanguageConsistency {
  /** Words with at least one letter. */
  words: number;
  /** Of those, words whose every letter is in the target script. */
  inTarget: number;
  /** inTarget / words, or null when the text has no word with a letter. */
  score: number | null;
}

/** The share of `text`'s words written in `script` (see the header for what a word is). */
export function languageConsistency(text: string, script: LanguageScript): LanguageConsistency {
  const target = inScript(script);
  let words = 0;
  let inTarget = 0;
  for (const word of text.match(WORD) ?? []) {
    const letters = word.match(LETTER);
    if (!letters) continue;
    words++;
    if (letters.every((ch) => target.test(ch))) inTarget++;
  }
  return { words, inTarget, score: words ? inTarget / words : null };
}

/**
 * R1's language-consistency reward of a completion: the score of its chain of thought (thinkText:
 * inside <think>…</think>, or what comes before </think> or <answer> when the tags are missing).
 */
export function languageConsistencyReward(
  completion: string,
  script: LanguageScript,
): number | null {
  return languageConsistency(thinkText(completion), script).score;
}
