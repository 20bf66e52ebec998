// Hostile and oversized input (issue 33, items 1, 2 and 9): every count that sizes work or memory
// has one limit, declared with its option and refused before anything is allocated, with a message
// naming the option, the value and the limit (the CLI's flags, config files and URLs, recipes, SFT
// options); a dataset line over the line limit is reported by its number and length, never parsed;
// option values outside the schema's range are refused, unusual ones accepted with a warning;
// --help describes --model truthfully; a resumed run says how many steps it trained. The guide's
// security page (docs/guide/security.md, "Limits") lists the limits: the table there is generated
// here from the declarations (UPDATE_README_LIMITS=1 rewrites it; the name is older than the
// page), and this test fails when the two differ.
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  configFromUrlParams,
  configSizeLimits,
  configWarnings,
  defaultConfig,
  flagName,
  parseCliArgs,
  resolveConfig,
} from '../../src/grpo/config';
import { parseRecipe } from '../../src/recipes/recipe-spec';
import { COLD_START_LIMIT, REJECTION_LIMITS } from '../../src/recipes/limits';
import { checkRejectionCounts } from '../../src/recipes/rejection-sampling';
import { parseRejectionSampleArgs } from '../../src/cli/_rejection-sample';
import {
  AHA,
  type Command,
  commandHelp,
  EVAL,
  flagCount,
  flagCounts,
  RECIPE,
  rewardFiles,
  takeCommandFlags,
  TRAIN,
  trainedLine,
} from '../../src/cli/_flags';
import { trlExportFiles } from '../../src/export/trl-archive';
import { exportTrl, TRL_EXPORT_PROMPTS } from '../../src/export/trl-export';
import { createTask, trainEvalProblems } from '../../src/tasks/index';
import { resolveSftConfig, SFT_OPTIONS, trlName } from '../../src/train/sft-config';
import { parseSftJsonl } from '../../src/train/sft-data';
import { DATASET_ROW_LIMIT, PARQUET_DECODED_LIMIT } from '../../src/tasks/datasets/tables';
import { overLimitMessage } from '../../src/core/limits';
import {
  JSONL_FILE_LIMIT,
  JSONL_LINE_LIMIT,
  jsonlLines,
  parseJsonlDataset,
} from '../../src/tasks/jsonl';

/** The message a call throws ('' when it does not throw). */
function thrown(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    return (e as Error).message;
  }
  return '';
}

const rejectionRecipe = (prompts: number, k: number) => ({
  name: 'rej',
  stages: [{ kind: 'rejection-sample', name: 'rej', prompts, options: { k } }],
});

describe('item 1: sizes have limits, checked before any work', () => {
  it('rejection-sample --k 1000000000 --prompts 1 is refused as it is parsed', () => {
    expect(
      thrown(() => parseRejectionSampleArgs(['--out', 'x', '--k', '1000000000', '--prompts', '1'])),
    ).toBe('--k 1000000000 is more than the limit of 1024 completions per prompt');
  });

  it('rejection-sample --prompts 1000000000, and prompts × k past the sample limit', () => {
    expect(thrown(() => parseRejectionSampleArgs(['--out', 'x', '--prompts', '1000000000']))).toBe(
      '--prompts 1000000000 is more than the limit of 100000 prompts',
    );
    expect(
      thrown(() => parseRejectionSampleArgs(['--out', 'x', '--prompts', '2000', '--k', '1000'])),
    ).toBe('--prompts × k = 2000 × 1000 = 2000000 is more than the limit of 1000000 samples');
    // Without --prompts the run's own count (steps × perStepPrompts) is checked, before any load.
    expect(
      thrown(() => checkRejectionCounts(undefined, 8, { steps: 1e6, perStepPrompts: 4 })),
    ).toBe(
      "rejection sampling: prompts (the run's steps × perStepPrompts) 4000000 is more than the limit of 100000 prompts",
    );
    expect(
      parseRejectionSampleArgs(['--out', 'x', '--k', '1024', '--prompts', '976']).prompts,
    ).toBe(976);
  });

  it("a recipe's rejection prompts, k and cold-start count are refused when it is parsed", () => {
    expect(thrown(() => parseRecipe(rejectionRecipe(1e9, 4)))).toBe(
      `recipe: stage 1 ('rej'): "prompts" 1000000000 is more than the limit of 100000 prompts`,
    );
    expect(thrown(() => parseRecipe(rejectionRecipe(1, 1e9)))).toBe(
      `recipe: stage 1 ('rej'): options.k (completions per prompt) 1000000000 is more than the limit of 1024 completions per prompt`,
    );
    const cold = {
      name: 'cold',
      stages: [{ kind: 'sft', name: 'cs', data: { coldStart: { count: 1e9 } } }],
    };
    expect(thrown(() => parseRecipe(cold))).toBe(
      `recipe: stage 1 ('cs'): data.coldStart.count 1000000000 is more than the limit of 10000 examples`,
    );
  });

  it('a recipe GRPO stage has the same steps limit as npm run train', () => {
    const big = { name: 'big', stages: [{ kind: 'grpo', name: 'g', options: { steps: 1e12 } }] };
    expect(thrown(() => parseRecipe(big))).toBe(
      `recipe: stage 1 ('g'): config 'steps' 1000000000000 is more than the limit of 1000000 steps`,
    );
    expect(thrown(() => parseCliArgs(['--steps', '1000000000000']))).toBe(
      '--steps 1000000000000 is more than the limit of 1000000 steps',
    );
  });

  it('--eval-prompts 100000000 is refused on the command line, in a config and in a URL', () => {
    expect(thrown(() => parseCliArgs(['--eval-prompts', '100000000']))).toBe(
      '--eval-prompts 100000000 is more than the limit of 10000 prompts',
    );
    expect(thrown(() => resolveConfig({ evalPrompts: 1e8 }))).toBe(
      "config 'evalPrompts' 100000000 is more than the limit of 10000 prompts",
    );
    expect(thrown(() => configFromUrlParams('evalPrompts=100000000'))).toBe(
      "config 'evalPrompts' 100000000 is more than the limit of 10000 prompts",
    );
    expect(resolveConfig({ evalPrompts: 10_000 }).evalPrompts).toBe(10_000);
  });

  it('SFT options that size a batch or a run have limits too', () => {
    expect(thrown(() => resolveSftConfig({ perDeviceTrainBatchSize: 1e9 }))).toBe(
      'per_device_train_batch_size 1000000000 is more than the limit of 4096 examples per micro-batch',
    );
    expect(thrown(() => resolveSftConfig({ max_steps: '1000000000000' }))).toBe(
      'max_steps 1000000000000 is more than the limit of 1000000 steps',
    );
  });
});

/** A command's count flag as its main reads it ('' when it is accepted). */
const flagThrown = (command: Command, name: string, value: string) =>
  thrown(() => {
    const { flags } = takeCommandFlags(command, [`--${name}`, value]);
    return command.flags.find((f) => f.name === name)!.count!.list
      ? flagCounts(command, flags, name, [])
      : flagCount(command, flags, name, 0);
  });

const countdownProblem = trainEvalProblems(createTask('countdown'), 1, 1, 0).train[0];

/** `n` custom rewards by id, each a valid source. */
const customRewards = (n: number) =>
  Object.fromEntries(
    Array.from({ length: n }, (_, i) => [`r${i}`, 'function reward() { return 0; }']),
  );

describe('item 1: the evaluations, the seeds, custom rewards and the TRL export have limits too', () => {
  it('npm run eval / aha / recipe --compare: --k, --eval-batch and the number of --seeds', () => {
    expect(flagThrown(EVAL, 'k', '1000000000')).toBe(
      '--k 1000000000 is more than the limit of 1024 completions per prompt',
    );
    expect(flagThrown(AHA, 'k', '1025')).toBe(
      '--k 1025 is more than the limit of 1024 completions per prompt',
    );
    expect(flagThrown(RECIPE, 'k', '1025')).toBe(
      '--k 1025 is more than the limit of 1024 completions per prompt',
    );
    expect(flagThrown(AHA, 'eval-batch', '100000000')).toBe(
      '--eval-batch 100000000 is more than the limit of 1024 prompts per batch',
    );
    const seeds = (n: number) => Array.from({ length: n }, (_, i) => i).join(',');
    expect(flagThrown(AHA, 'seeds', seeds(65))).toBe(
      '--seeds count 65 is more than the limit of 64 seeds',
    );
    expect(flagThrown(RECIPE, 'seeds', seeds(65))).toBe(
      '--seeds count 65 is more than the limit of 64 seeds',
    );
    // At the limits, and the other refusals still name the flag.
    expect(flagCount(EVAL, takeCommandFlags(EVAL, ['--k', '1024']).flags, 'k', 4)).toBe(1024);
    expect(flagCount(EVAL, new Map(), 'k', 4)).toBe(4);
    expect(
      flagCounts(AHA, takeCommandFlags(AHA, ['--seeds', seeds(64)]).flags, 'seeds', [1]),
    ).toHaveLength(64);
    expect(flagThrown(EVAL, 'k', '1e3')).toBe("--k must be an integer ≥ 0, got '1e3'");
    expect(flagThrown(AHA, 'eval-batch', '0')).toBe('--eval-batch must be an integer ≥ 1, got 0');
    expect(flagThrown(AHA, 'seeds', '1,x')).toBe(
      "--seeds must be integers ≥ 0, comma-separated, got 'x' in '1,x'",
    );
    // --help says the limit.
    expect(commandHelp(AHA)).toMatch(/--seeds <1,2,3> .*\(at most 64 seeds\)/);
    expect(commandHelp(EVAL)).toMatch(/--k <samples> .*\(at most 1024\)/);
  });

  it('the number of custom rewards: in a config, on the command line and with --reward-file', () => {
    expect(thrown(() => resolveConfig({ customRewards: customRewards(17) }))).toBe(
      "config 'customRewards' count 17 is more than the limit of 16 custom rewards",
    );
    expect(
      thrown(() => parseCliArgs(['--custom-rewards', JSON.stringify(customRewards(17))])),
    ).toBe('--custom-rewards count 17 is more than the limit of 16 custom rewards');
    expect(
      Object.keys(resolveConfig({ customRewards: customRewards(16) }).customRewards),
    ).toHaveLength(16);
    // Refused before any file is read (these files do not exist).
    const files = Array.from({ length: 12 }, (_, i) => `f${i}=/nonexistent/f${i}.js`);
    expect(thrown(() => rewardFiles(files, { customRewards: customRewards(5) }))).toBe(
      'custom rewards (customRewards and --reward-file) 17 is more than the limit of 16 custom rewards',
    );
  });

  it('the TRL export refuses steps × perStepPrompts past its limit before drawing a prompt', () => {
    // Just past the limit first: without the check this one exports (6 s) and the test fails here
    // instead of drawing 4e9 prompts below.
    expect(thrown(() => trlExportFiles(resolveConfig({ steps: 25_001, perStepPrompts: 4 })))).toBe(
      'TRL export: steps × perStepPrompts = 25001 × 4 = 100004 is more than the limit of 100000 training prompts',
    );
    const huge = resolveConfig({ steps: 1_000_000, perStepPrompts: 4096 });
    expect(thrown(() => trlExportFiles(huge))).toMatch(
      /^TRL export: steps × perStepPrompts = 1000000 × 4096 = 4096000000 is more than/,
    );
    // exportTrl itself, given prompts drawn elsewhere.
    const problem = trlExportFiles(resolveConfig({ steps: 1, perStepPrompts: 1 }));
    expect(problem.get('train.jsonl')!.split('\n')).toHaveLength(2);
    const over = Array.from({ length: TRL_EXPORT_PROMPTS.max + 1 }, () => countdownProblem);
    expect(thrown(() => exportTrl(defaultConfig(), { trainPrompts: over, evalPrompts: [] }))).toBe(
      'exportTrl: training prompts 100001 is more than the limit of 100000 training prompts',
    );
  });
});

describe('item 2: one huge line', () => {
  // Past the limit by a little: enough to show the bound, cheap to build (2 MiB).
  const huge = JSON.stringify({ prompt: '1+'.repeat(JSONL_LINE_LIMIT.max / 2 + 8), answer: '2' });
  const tooLong = `length ${huge.length} is more than the limit of 1048576 characters a line (skipped unread)`;

  it('the prompt reader reports the line by number and length and reads the rest', () => {
    const { problems, issues } = parseJsonlDataset(`${huge}\n{"prompt": "1+1", "answer": "2"}\n`);
    expect(issues).toEqual([{ line: 1, message: tooLong }]);
    expect(problems.map((p) => p.id)).toEqual(['jsonl-2']);
  });

  it('the SFT reader too', () => {
    const { rows, issues } = parseSftJsonl(`{"text": "ok"}\r\n${huge}\r\n`);
    expect(issues).toEqual([{ line: 2, message: tooLong }]);
    expect(rows).toEqual([{ kind: 'text', line: 1, text: 'ok' }]);
  });

  it('a line of exactly the limit is read; one character more is not', () => {
    const limit = { max: 4, unit: 'characters' };
    expect([...jsonlLines('\uFEFFabcd\rabcde\n\n', limit)]).toEqual([
      { line: 1, text: 'abcd' },
      { line: 2, tooLong: 5 },
      { line: 3, text: '' },
      { line: 4, text: '' },
    ]);
  });
});

describe('item 9: option values outside the schema', () => {
  it('--epsilon 5 and --learning-rate 1000 are refused, naming the flag as typed', () => {
    expect(thrown(() => parseCliArgs(['--epsilon', '5']))).toBe('--epsilon must be ≤ 1, got 5');
    expect(thrown(() => resolveConfig(parseCliArgs(['--learning-rate', '1000'])))).toBe(
      '--learning-rate must be ≤ 1, got 1000',
    );
    expect(thrown(() => parseCliArgs(['--learning_rate=2']))).toBe(
      '--learning_rate must be ≤ 1, got 2',
    );
    expect(thrown(() => parseCliArgs(['--warmup-ratio', '1']))).toBe(
      '--warmup-ratio must be < 1, got 1',
    );
    expect(thrown(() => parseCliArgs(['--num-generations', 'many']))).toBe(
      '--num-generations must be an integer, got "many"',
    );
    // A value from a config file, a URL or the page's form is named by its key.
    expect(thrown(() => resolveConfig({ epsilon: 5 }))).toBe("config 'epsilon' must be ≤ 1, got 5");
    expect(thrown(() => configFromUrlParams('epsilon=5'))).toBe(
      "config 'epsilon' must be ≤ 1, got 5",
    );
    expect(thrown(() => resolveConfig({ adamBeta2: 1 }))).toBe(
      "config 'adamBeta2' must be < 1, got 1",
    );
    expect(thrown(() => resolveConfig({ warmupRatio: 1 }))).toBe(
      "config 'warmupRatio' must be < 1, got 1",
    );
    // LoRA α has the bound an imported adapter_config.json's lora_alpha has (α/r was 2.5e307).
    expect(thrown(() => parseCliArgs(['--lora-alpha', '1e308']))).toBe(
      '--lora-alpha must be ≤ 4096, got 1e+308',
    );
  });

  it('--max-grad-norm 0 and a large learning rate are accepted with a warning each', () => {
    const config = resolveConfig(parseCliArgs(['--learning-rate', '0.5', '--max-grad-norm', '0']));
    expect(configWarnings(config, flagName)).toEqual([
      '--learning-rate 0.5 is outside the usual range (≤ 0.01): far above GRPO (1e-6) and LoRA (1e-4) rates; runs diverge',
      '--max-grad-norm 0 is outside the usual range (> 0): gradient clipping is off: one large gradient moves the weights unbounded',
    ]);
    expect(configWarnings(resolveConfig({}))).toEqual([]);
  });

  it('--help says --model takes a local folder, not a URL or a Hub name', () => {
    const line = commandHelp(TRAIN)
      .split('\n')
      .find((l) => l.startsWith('  --model '));
    expect(line).toMatch(/a local Hugging Face model folder/);
    expect(line).not.toMatch(/URL|Hugging Face name/);
  });

  it('a resume from step 2 to 4 says it trained 2 steps', () => {
    expect(trainedLine(2, 4, 1.25)).toBe('trained 2 steps (2 → 4) in 1.3 s');
    expect(trainedLine(0, 4, 3)).toBe('trained 4 steps in 3.0 s');
    expect(trainedLine(3, 4, 3)).toBe('trained 1 step (3 → 4) in 3.0 s');
  });
});

// ---------------------------------------------------------------------------------------------
// The guide's limits table, built from the declarations and the messages the checks really give.
const code = (s: string) => `\`${s}\``;
const kebab = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

function limitsTable(): string {
  const rows: string[][] = [];
  for (const { key, limit } of configSizeLimits()) {
    // An object's limit counts its entries (customRewards).
    const over =
      typeof resolveConfig({})[key] === 'object'
        ? JSON.stringify(customRewards(limit.max + 1))
        : String(limit.max + 1);
    rows.push([
      `${code(flagName(key))} / ${code(key)}`,
      `${limit.max} ${limit.unit}`,
      code(thrown(() => parseCliArgs([flagName(key), over]))),
    ]);
  }
  for (const o of SFT_OPTIONS) {
    if (!o.limit) continue;
    rows.push([
      `SFT ${code(`--${kebab(o.key)}`)} / ${code(trlName(o.key))}`,
      `${o.limit.max} ${o.limit.unit}`,
      code(thrown(() => resolveSftConfig({ [o.key]: o.limit!.max + 1 }))),
    ]);
  }
  // The commands' own count flags, as declared in their tables (src/cli/_flags.ts).
  for (const command of [EVAL, AHA, RECIPE]) {
    for (const f of command.flags) {
      if (!f.count) continue;
      const { limit, list } = f.count;
      const over = list
        ? Array.from({ length: limit.max + 1 }, (_, i) => i).join(',')
        : String(limit.max + 1);
      const what = command === RECIPE ? 'recipe -- --compare' : `${command.name} --`;
      rows.push([
        `${code(`npm run ${what} --${f.name}`)}${list ? ' (how many)' : ''}`,
        `${limit.max} ${limit.unit}`,
        code(flagThrown(command, f.name, over)),
      ]);
    }
  }
  const r = REJECTION_LIMITS;
  const arg = (...a: string[]) => thrown(() => parseRejectionSampleArgs(['--out', 'x', ...a]));
  rows.push(
    [
      `${code('npm run rejection-sample -- --k')} / recipe ${code('options.k')}`,
      `${r.k.max} ${r.k.unit}`,
      code(arg('--k', String(r.k.max + 1))),
    ],
    [
      `${code('npm run rejection-sample -- --prompts')} / recipe ${code('prompts')}`,
      `${r.prompts.max} ${r.prompts.unit}`,
      code(arg('--prompts', String(r.prompts.max + 1))),
    ],
    [
      `${code('npm run rejection-sample -- --batch-size')} / recipe ${code('options.batchSize')}`,
      `${r.batchSize.max} ${r.batchSize.unit}`,
      code(arg('--batch-size', String(r.batchSize.max + 1))),
    ],
    [
      'rejection prompts × k',
      `${r.samples.max} ${r.samples.unit}`,
      code(arg('--prompts', '1001', '--k', '1000')),
    ],
    [
      `recipe ${code('data.coldStart.count')}`,
      `${COLD_START_LIMIT.max} ${COLD_START_LIMIT.unit}`,
      code(
        thrown(() =>
          parseRecipe({
            name: 'r',
            stages: [{ kind: 'sft', name: 's', data: { coldStart: { count: 10_001 } } }],
          }),
        ),
      ),
    ],
    [
      `TRL export: ${code('steps')} × ${code('perStepPrompts')}`,
      `${TRL_EXPORT_PROMPTS.max} ${TRL_EXPORT_PROMPTS.unit}`,
      code(
        thrown(() =>
          trlExportFiles(resolveConfig({ steps: TRL_EXPORT_PROMPTS.max + 1, perStepPrompts: 1 })),
        ),
      ),
    ],
    [
      'a line of a JSONL dataset (prompts or SFT)',
      `${JSONL_LINE_LIMIT.max} ${JSONL_LINE_LIMIT.unit}`,
      code(`line 1: ${parseSftJsonl('x'.repeat(JSONL_LINE_LIMIT.max + 1)).issues[0].message}`),
    ],
    [
      'a dataset: its file, or a folder of shards together (page and command line)',
      `${JSONL_FILE_LIMIT.max} ${JSONL_FILE_LIMIT.unit}`,
      code(
        `--dataset: <path>: ${overLimitMessage('size', JSONL_FILE_LIMIT.max + 1, JSONL_FILE_LIMIT)} (a dataset)`,
      ),
    ],
    [
      'rows of a dataset (all its files together)',
      `${DATASET_ROW_LIMIT.max} ${DATASET_ROW_LIMIT.unit}`,
      code(
        `<file>: ${overLimitMessage('rows', DATASET_ROW_LIMIT.max + 1, DATASET_ROW_LIMIT)} (all files together)`,
      ),
    ],
    [
      "a Parquet file's decoded size (from its footer, before any page is read)",
      `${PARQUET_DECODED_LIMIT.max} ${PARQUET_DECODED_LIMIT.unit}`,
      code(
        `<file>: ${overLimitMessage('decoded size', PARQUET_DECODED_LIMIT.max + 1, PARQUET_DECODED_LIMIT)} (the Parquet footer's total_byte_size)`,
      ),
    ],
  );
  return [
    '| Option | Limit | What a refusal says |',
    '| --- | --- | --- |',
    ...rows.map((row) => `| ${row.join(' | ')} |`),
  ].join('\n');
}

/** A Markdown table's rows with cell padding and the separator's width taken out. */
const tableRows = (text: string) =>
  text
    .trim()
    .split('\n')
    .map((row) => (/^[|\s:-]+$/.test(row) ? '|---|' : row.replace(/ +/g, ' ').trim()));

describe("the guide's Limits section lists the limits", () => {
  it('its table is the one the declarations give', () => {
    const PAGE = 'docs/guide/security.md';
    const START = '<!-- size-limits:start (tests/unit/size-limits.test.ts) -->';
    const END = '<!-- size-limits:end -->';
    const page = readFileSync(PAGE, 'utf8');
    const from = page.indexOf(START);
    const to = page.indexOf(END);
    expect(page.indexOf('\n## Limits\n')).toBeGreaterThan(-1);
    expect(from).toBeGreaterThan(page.indexOf('\n## Limits\n'));
    expect(to).toBeGreaterThan(from);
    const table = limitsTable();
    if (process.env.UPDATE_README_LIMITS)
      writeFileSync(PAGE, `${page.slice(0, from + START.length)}\n${table}\n${page.slice(to)}`);
    // Compared as prettier leaves a table (padded cells, separator dashes to the column width).
    else expect(tableRows(page.slice(from + START.length, to))).toEqual(tableRows(table));
  });
});
