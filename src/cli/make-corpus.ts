// `node dist-cli/make-corpus.js --out <dir> [--seed 1] [--count 60000] [--eval 256]
//   [--check-rate 0.2] [--arithmetic-share 0.1] [--max-tries 4] [--aim-rate 0.5]
//   [--careful-aim-rate 1] [--max-completion-tokens 80] [--careful-direction backward]
//   [--verify-hit 1] [--whole-numbers 199]`
// Writes the tiny reasoner's pretraining data (src/tasks/traces.ts) for tools/pretrain/pretrain.py:
//   tokenizer.json, tokenizer_config.json   the model's tokenizer
//   train.jsonl    one trace per line: prompt ids (with BOS), completion ids (with EOS), its style,
//                  verdict and reflection flag
//   eval.jsonl     held-out Countdown problems (never in train.jsonl): prompt ids, numbers, target
//   samples.txt    the first traces as text, for people
//   stats.json     the mix, rates and token lengths
// Every prompt and completion is tokenized with the project's tokenizer loader (src/formats/tokenizer.ts)
// and must decode back to the same text without <unk>, so the corpus is exactly what the app sees.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createTokenizer } from '../formats/tokenizer';
import { createCountdownTask } from '../tasks/countdown';
import {
  completionTokenCount,
  DEFAULT_TRACE_MIX,
  generateTraces,
  heldOutCountdownProblems,
  promptText,
  SPECIAL_TOKENS,
  tinyTokenizerFiles,
  TINY_COUNTDOWN_OPTIONS,
  type TraceMix,
} from '../tasks/traces';

const USAGE = `usage: make-corpus --out <dir> [--seed 1] [--count 60000] [--eval 256]
  [--check-rate ${DEFAULT_TRACE_MIX.checkRate}] [--arithmetic-share ${DEFAULT_TRACE_MIX.arithmeticShare}] [--max-tries ${DEFAULT_TRACE_MIX.maxTries}] [--aim-rate ${DEFAULT_TRACE_MIX.aimRate}]
  [--careful-aim-rate ${DEFAULT_TRACE_MIX.carefulAimRate}] [--max-completion-tokens ${DEFAULT_TRACE_MIX.maxCompletionTokens}]
  [--careful-direction ${DEFAULT_TRACE_MIX.carefulDirection}] [--verify-hit ${DEFAULT_TRACE_MIX.verifyHit ? 1 : 0}]
  [--whole-numbers ${DEFAULT_TRACE_MIX.wholeNumbersUpTo}]  (numbers up to N are one token; 0: one token per digit)`;

function parseArgs(args: string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < args.length; i += 2) {
    const flag = args[i];
    const value = args[i + 1];
    if (!flag.startsWith('--') || value === undefined || value.startsWith('--')) {
      throw new Error(`bad argument ${JSON.stringify(flag)}\n${USAGE}`);
    }
    out.set(flag.slice(2), value);
  }
  return out;
}

function numberArg(args: Map<string, string>, name: string, fallback: number): number {
  const text = args.get(name);
  args.delete(name);
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isFinite(value)) throw new Error(`--${name} must be a number, got ${text}`);
  return value;
}

function directionArg(args: Map<string, string>): TraceMix['carefulDirection'] {
  const v = args.get('careful-direction') ?? DEFAULT_TRACE_MIX.carefulDirection;
  args.delete('careful-direction');
  if (v !== 'forward' && v !== 'backward') {
    throw new Error(`--careful-direction must be forward or backward, got ${v}`);
  }
  return v;
}

async function main(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(USAGE);
    return;
  }
  const args = parseArgs(argv);
  const outArg = args.get('out');
  args.delete('out');
  if (!outArg) throw new Error(USAGE);
  const out = resolve(outArg);
  const seed = numberArg(args, 'seed', 1);
  // The shipped model's corpus: 60,000 traces, each seen about 6 times in pretraining. Its model
  // chooses careful work on held-out prompts less often than the corpus does (10% vs 25%); 240,000
  // traces did not give a better model (tools/pretrain/README.md, runs N1–N2).
  const count = numberArg(args, 'count', 60000);
  const evalCount = numberArg(args, 'eval', 256);
  const mix: TraceMix = {
    ...DEFAULT_TRACE_MIX,
    checkRate: numberArg(args, 'check-rate', DEFAULT_TRACE_MIX.checkRate),
    arithmeticShare: numberArg(args, 'arithmetic-share', DEFAULT_TRACE_MIX.arithmeticShare),
    maxTries: numberArg(args, 'max-tries', DEFAULT_TRACE_MIX.maxTries),
    aimRate: numberArg(args, 'aim-rate', DEFAULT_TRACE_MIX.aimRate),
    carefulAimRate: numberArg(args, 'careful-aim-rate', DEFAULT_TRACE_MIX.carefulAimRate),
    maxCompletionTokens: numberArg(
      args,
      'max-completion-tokens',
      DEFAULT_TRACE_MIX.maxCompletionTokens,
    ),
    carefulDirection: directionArg(args),
    verifyHit: numberArg(args, 'verify-hit', DEFAULT_TRACE_MIX.verifyHit ? 1 : 0) !== 0,
    wholeNumbersUpTo: numberArg(args, 'whole-numbers', DEFAULT_TRACE_MIX.wholeNumbersUpTo),
  };
  if (args.size > 0) throw new Error(`unknown option --${[...args.keys()][0]}\n${USAGE}`);

  const files = tinyTokenizerFiles(mix.wholeNumbersUpTo);
  const tok = await createTokenizer(files.tokenizerJson, files.tokenizerConfig);
  const eos = tok.tokenToId(SPECIAL_TOKENS.eos);
  const unk = tok.tokenToId(SPECIAL_TOKENS.unk);
  if (eos === null || unk === null) throw new Error('tokenizer lacks </s> or <unk>');
  const encodeExact = (text: string, addSpecialTokens: boolean): number[] => {
    const ids = tok.encode(text, { addSpecialTokens });
    if (ids.includes(unk) || tok.decode(ids, { skipSpecialTokens: true }) !== text) {
      throw new Error(`text does not round-trip through the tokenizer: ${JSON.stringify(text)}`);
    }
    return ids;
  };

  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'tokenizer.json'), JSON.stringify(files.tokenizerJson, null, 2) + '\n');
  writeFileSync(
    join(out, 'tokenizer_config.json'),
    JSON.stringify(files.tokenizerConfig, null, 2) + '\n',
  );

  const traces = generateTraces(seed, count, mix);
  const lines: string[] = [];
  const byStyle = new Map<
    string,
    { n: number; correct: number; reflects: number; tokens: number }
  >();
  let maxPrompt = 0;
  let maxCompletion = 0;
  for (const t of traces) {
    const prompt = encodeExact(t.prompt, true);
    const completion = [...encodeExact(t.completion, false), eos];
    if (completion.length !== completionTokenCount(t.completion, mix.wholeNumbersUpTo)) {
      // The generator budgets tries with completionTokenCount; it must agree with the tokenizer.
      throw new Error(
        `completionTokenCount says ${completionTokenCount(t.completion, mix.wholeNumbersUpTo)} tokens, the tokenizer ${completion.length}: ${t.completion}`,
      );
    }
    maxPrompt = Math.max(maxPrompt, prompt.length);
    maxCompletion = Math.max(maxCompletion, completion.length);
    const s = byStyle.get(t.style) ?? { n: 0, correct: 0, reflects: 0, tokens: 0 };
    s.n++;
    s.correct += t.correct ? 1 : 0;
    s.reflects += t.reflects ? 1 : 0;
    s.tokens += completion.length;
    byStyle.set(t.style, s);
    lines.push(
      JSON.stringify({
        prompt,
        completion,
        task: t.problem.task,
        style: t.style,
        correct: t.correct,
        reflects: t.reflects,
      }),
    );
  }
  writeFileSync(join(out, 'train.jsonl'), lines.join('\n') + '\n');
  writeFileSync(
    join(out, 'samples.txt'),
    traces
      .slice(0, 40)
      .map((t) => `[${t.style}${t.correct ? ', right' : ''}] ${t.completion}`)
      .join('\n') + '\n',
  );

  const task = createCountdownTask(TINY_COUNTDOWN_OPTIONS);
  const held = heldOutCountdownProblems(seed + 1000, evalCount);
  writeFileSync(
    join(out, 'eval.jsonl'),
    held
      .map((p) => {
        if (p.verifier.kind !== 'countdown') throw new Error('expected Countdown problems');
        return JSON.stringify({
          id: p.id,
          prompt: encodeExact(promptText(task, p), true),
          question: p.question,
          nums: p.verifier.nums,
          target: p.verifier.target,
        });
      })
      .join('\n') + '\n',
  );

  const countdown = traces.filter((t) => t.problem.task === 'countdown');
  const rate = (xs: typeof traces, f: (t: (typeof traces)[number]) => boolean) =>
    xs.length === 0 ? 0 : xs.filter(f).length / xs.length;
  const stats = {
    seed,
    count,
    evalCount,
    evalSeed: seed + 1000,
    mix,
    vocabSize: tok.vocabSize,
    maxPromptTokens: maxPrompt,
    maxCompletionTokens: maxCompletion,
    countdown: {
      traces: countdown.length,
      accuracy: rate(countdown, (t) => t.correct),
      reflectionRate: rate(countdown, (t) => t.reflects),
      accuracyReflecting: rate(
        countdown.filter((t) => t.reflects),
        (t) => t.correct,
      ),
      accuracyNotReflecting: rate(
        countdown.filter((t) => !t.reflects),
        (t) => t.correct,
      ),
    },
    styles: Object.fromEntries(
      [...byStyle].map(([k, s]) => [
        k,
        {
          traces: s.n,
          accuracy: s.correct / s.n,
          reflectionRate: s.reflects / s.n,
          meanCompletionTokens: s.tokens / s.n,
        },
      ]),
    ),
  };
  writeFileSync(join(out, 'stats.json'), JSON.stringify(stats, null, 2) + '\n');
  console.log(JSON.stringify(stats, null, 2));
}

main(process.argv.slice(2)).catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(1);
});
