// `npm run rejection-sample`'s arguments (src/cli/_rejection-sample.ts): every flag its --help
// names is parsed and every flag it parses is named; values become the rejection options, config
// options stay config options; bad values throw naming the flag. (The command itself runs in
// tests/kernels/cli-rejection-sample.test.ts.)
import { describe, expect, it } from 'vitest';
import {
  languageScriptOf,
  parseRejectionSampleArgs,
  REJECTION_SAMPLE,
  rejectionSampleHelp,
  summaryLines,
} from '../../src/cli/_rejection-sample';
import { CONFIG_KEYS } from '../../src/grpo/config';

const kebab = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

describe('npm run rejection-sample arguments', () => {
  it('--help lists the command flags and every config option, once each', () => {
    const help = rejectionSampleHelp();
    const listed = [...help.matchAll(/^ {2}--([a-z][a-z0-9-]*)/gm)].map((m) => m[1]);
    expect(listed.sort()).toEqual(
      [...REJECTION_SAMPLE.flags.map((f) => f.name), ...CONFIG_KEYS.map(kebab), 'help'].sort(),
    );
    for (const f of REJECTION_SAMPLE.flags) {
      const argv = ['--out', 'o', ...(f.name === 'out' ? [] : [`--${f.name}`])];
      if (!f.boolean && f.name !== 'out') argv.push(f.name === 'language' ? 'latin' : '1');
      expect(() => parseRejectionSampleArgs(argv), f.name).not.toThrow();
    }
  });

  it('turns flags into options and leaves config options to the config', () => {
    const args = parseRejectionSampleArgs([
      ...['--checkpoint', 'runs/a', '--out=runs/a/rs', '--k', '6', '--prompts', '20'],
      ...['--seed', '9', '--min-length', '3', '--max-length', '64', '--no-dedupe'],
      ...['--language', 'cyrillic', '--min-language-consistency', '0.9', '--batch-size', '4'],
      ...['--temperature', '0.7', '--model', 'bundled', '--max-completion-length', '48'],
    ]);
    expect(args).toEqual({
      checkpoint: 'runs/a',
      out: 'runs/a/rs',
      prompts: 20,
      options: {
        k: 6,
        seed: 9,
        minLength: 3,
        maxLength: 64,
        batchSize: 4,
        dedupe: false,
        language: { script: 'Cyrillic', minLanguageConsistency: 0.9 },
      },
      overrides: { temperature: 0.7, model: 'bundled', maxCompletionLength: 48 },
    });
    // Defaults: k 8, no filter beyond the built-in rules; --language alone asks for every word.
    expect(parseRejectionSampleArgs(['--out', 'o']).options).toEqual({ k: 8 });
    expect(
      parseRejectionSampleArgs(['--out', 'o', '--language', 'Latin']).options.language,
    ).toEqual({ script: 'Latin', minLanguageConsistency: 1 });
    // --min-language-consistency alone: the config's languageScript, filled in when resolved.
    expect(
      parseRejectionSampleArgs(['--out', 'o', '--min-language-consistency', '0.8']).options
        .language,
    ).toEqual({ script: '', minLanguageConsistency: 0.8 });
    expect(languageScriptOf('hIrAgAnA')).toBe('Hiragana');
  });

  it('refuses bad values, naming the flag', () => {
    expect(() => parseRejectionSampleArgs([])).toThrow('--out <folder> is required');
    expect(() => parseRejectionSampleArgs(['--out', 'o', '--prompts', '2.5'])).toThrow(
      "--prompts must be an integer ≥ 1, got '2.5'",
    );
    expect(() => parseRejectionSampleArgs(['--out', 'o', '--seed', '-1'])).toThrow(
      "--seed must be an integer ≥ 0, got '-1'",
    );
    expect(() => parseRejectionSampleArgs(['--out', 'o', '--no-dedupe=yes'])).toThrow(
      '--no-dedupe takes no value',
    );
    expect(() =>
      parseRejectionSampleArgs(['--out', 'o', '--min-language-consistency', 'x']),
    ).toThrow("--min-language-consistency must be a number in [0, 1], got 'x'");
    expect(() => parseRejectionSampleArgs(['--out', 'o', '--temprature', '1'])).toThrow(
      'unknown option --temprature',
    );
  });

  it('prints the yield and the reasons', () => {
    const lines = summaryLines(
      {
        samples: [],
        perPrompt: [
          { problemId: 'a', sampled: 4, kept: 3 },
          { problemId: 'b', sampled: 4, kept: 0 },
        ],
        sampled: 8,
        kept: 3,
        yield: 3 / 8,
        reasons: {
          wrong: 4,
          'no-answer': 1,
          unverifiable: 0,
          format: 2,
          truncated: 0,
          'too-short': 0,
          'too-long': 0,
          language: 0,
          duplicate: 0,
        },
      },
      2,
    );
    expect(lines).toEqual([
      '2 training prompts × 4: kept 3 of 8 (yield 37.5%); 1 of 2 prompts kept at least one',
      'rejected (a sample may have several reasons): wrong 4, no-answer 1, format 2',
    ]);
  });
});
