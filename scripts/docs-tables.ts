// The guide's generated option tables and the command lines the docs may name, from the tables the
// CLI itself parses and prints its --help from: CONFIG_SCHEMA (src/grpo/config.ts), the commands'
// flag tables (src/cli/_flags.ts, _sft.ts, _rejection-sample.ts) and SFT_OPTIONS. A block
//   <!-- generated: train-options --> … <!-- /generated -->
// in a markdown file holds generatedTable('train-options'); tests/unit/docs.test.ts fails when it
// differs and UPDATE_DOCS=1 rewrites it. Blocks: train-options (train's own flags and every config
// option), sft-options (sft's flags and SFT options), and <command>-flags for each command's own
// flags (eval, aha, plan, recipe, rejection-sample).
import { CONFIG_KEYS, CONFIG_SCHEMA, parseCliArgs, type ConfigKey } from '../src/grpo/config';
import {
  AHA,
  EVAL,
  PLAN,
  RECIPE,
  takeCommandFlags,
  TRAIN,
  type Command,
  type CommandFlag,
} from '../src/cli/_flags';
import { parseSftArgs, SFT } from '../src/cli/_sft';
import { REJECTION_SAMPLE } from '../src/cli/_rejection-sample';
import { SFT_DEFAULTS, SFT_OPTIONS, trlName } from '../src/train/sft-config';

const kebab = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** A table cell of prose: one line; pipes, `<` (not a tag) and `*` (not emphasis) escaped. */
const cell = (s: string) => s.replace(/([|<*])/g, '\\$1').replace(/\s*\n\s*/g, ' ');
/** Inline code in a table cell (a pipe still ends a GFM cell inside code, so it is escaped). */
const code = (s: string) => {
  const t = s.replace(/\|/g, '\\|');
  return t.includes('`') ? `\`\` ${t} \`\`` : `\`${t}\``;
};

function flagRows(flags: readonly CommandFlag[]): string[] {
  return [
    '| Flag | Meaning |',
    '| --- | --- |',
    ...flags.map((f) => {
      const limit = f.count ? ` (at most ${f.count.limit.max} ${f.count.limit.unit})` : '';
      return `| ${code(`--${f.name}${f.boolean ? '' : ` <${f.value}>`}`)} | ${cell(f.help + limit)} |`;
    }),
  ];
}

function typeText(key: ConfigKey): string {
  const t = CONFIG_SCHEMA[key].type as {
    kind: string;
    values?: readonly string[];
    min?: number;
    max?: number;
    nullable?: boolean;
  };
  let s = t.kind === 'enum' ? (t.values ?? []).join(' \\| ') : t.kind;
  if (t.kind === 'int' || t.kind === 'number') {
    if (t.min !== undefined && t.max !== undefined) s += ` ${t.min}…${t.max}`;
    else if (t.min !== undefined) s += ` ≥ ${t.min}`;
  }
  return t.nullable ? `${s} or null` : s;
}

/** Every config option: flag, type, default, TRL name, help (and its size limit). */
function configRows(): string[] {
  return [
    '| Option | Type | Default | TRL | Meaning |',
    '| --- | --- | --- | --- | --- |',
    ...CONFIG_KEYS.map((key) => {
      const f = CONFIG_SCHEMA[key];
      const limit = (f.type as { limit?: { max: number; unit: string } }).limit;
      const help = f.help + (limit ? ` (at most ${limit.max} ${limit.unit})` : '');
      return `| ${code(`--${kebab(key)}`)} | ${typeText(key)} | ${code(JSON.stringify(f.default))} | ${f.trl ? code(f.trl) : '–'} | ${cell(help)} |`;
    }),
  ];
}

function sftRows(): string[] {
  const own = SFT.flags.filter((f) => !SFT_OPTIONS.some((o) => kebab(o.key) === f.name));
  return [
    ...flagRows(own),
    '',
    '| Option | TRL `SFTConfig` | Default | Meaning |',
    '| --- | --- | --- | --- |',
    ...SFT_OPTIONS.map((o) => {
      const limit = o.limit ? ` (at most ${o.limit.max} ${o.limit.unit})` : '';
      return `| ${code(`--${kebab(o.key)}`)} | ${code(trlName(o.key))} | ${code(JSON.stringify(SFT_DEFAULTS[o.key]))} | ${cell(o.help + limit)} |`;
    }),
  ];
}

const FLAG_TABLES: Record<string, Command> = {
  'eval-flags': EVAL,
  'aha-flags': AHA,
  'plan-flags': PLAN,
  'recipe-flags': RECIPE,
  'rejection-sample-flags': REJECTION_SAMPLE,
};

/** The names of the generated blocks. */
export const TABLE_NAMES = ['train-options', 'sft-options', ...Object.keys(FLAG_TABLES)];

/** A generated block's markdown (without its markers). */
export function generatedTable(name: string): string {
  if (name === 'train-options')
    return [
      ...flagRows(TRAIN.flags),
      '',
      'Options (kebab-case or snake_case; TRL names and `--no-<flag>` for false work too; `--config file.json` sets them from a file):',
      '',
      ...configRows(),
    ].join('\n');
  if (name === 'sft-options') return sftRows().join('\n');
  const command = FLAG_TABLES[name];
  if (!command) throw new Error(`no generated table '${name}' (known: ${TABLE_NAMES.join(', ')})`);
  return flagRows(command.flags).join('\n');
}

const BLOCK = /<!-- generated: ([a-z-]+) -->\n([\s\S]*?)<!-- \/generated -->/g;

/** The generated blocks of a markdown text: name → contents (between the markers, trimmed). */
export function generatedBlocks(markdown: string): Map<string, string> {
  return new Map([...markdown.matchAll(BLOCK)].map((m) => [m[1], m[2].trim()]));
}

/**
 * A block as a comparison sees it: each table row's cells trimmed (prettier pads the columns of a
 * table it formats; the padding is not content), other lines trimmed, blank lines dropped.
 */
export function normalizeBlock(block: string): string {
  return block
    .split('\n')
    .map((line) => {
      const t = line.trim();
      if (!t.startsWith('|')) return t;
      const cells = t
        .slice(1, t.endsWith('|') ? -1 : undefined)
        .split(/(?<!\\)\|/)
        .map((c) => c.trim().replace(/^:?-{3,}:?$/, '---'));
      return `| ${cells.join(' | ')} |`;
    })
    .filter((line) => line !== '')
    .join('\n');
}

/** The text with every generated block replaced by its table. */
export function fillGeneratedBlocks(markdown: string): string {
  return markdown.replace(
    BLOCK,
    (_, name: string) =>
      `<!-- generated: ${name} -->\n${generatedTable(name)}\n<!-- /generated -->`,
  );
}

/** Flags of `npm run export-trl` (src/cli/export-trl.ts reads them by hand, then config options). */
const EXPORT_TRL_FLAGS = new Set(['config', 'run', 'out']);

/** The CLI commands whose flags the docs are checked against. */
export const CLI_COMMANDS = [
  'train',
  'eval',
  'aha',
  'plan',
  'sft',
  'recipe',
  'rejection-sample',
  'export-trl',
  'adapter',
];

/** Whether config options (CONFIG_SCHEMA's flags) parse `--name`. */
function isConfigFlag(name: string): boolean {
  try {
    parseCliArgs([`--${name}`, 'x']);
    return true;
  } catch (e) {
    // A wrong value ('x' for a number) still means the option exists.
    return !/unknown option/.test((e as Error).message);
  }
}

function ownFlag(command: Command, name: string): boolean {
  try {
    return takeCommandFlags(command, [`--${name}`, 'x']).flags.has(name);
  } catch {
    return false;
  }
}

/** Whether `npm run sft` accepts `--name`. */
function sftAccepts(name: string): boolean {
  try {
    parseSftArgs([`--${name}`, 'x']);
    return true;
  } catch (e) {
    return !/unknown argument/.test((e as Error).message);
  }
}

/** Whether `npm run <script>` accepts `--name` (its own flags, config options, --help) on a
 * command line that also gives `others` (`plan --sft` takes sft's options, not train's). */
export function acceptsFlag(script: string, name: string, others: readonly string[] = []): boolean {
  if (name === 'help') return true;
  switch (script) {
    case 'train':
      return ownFlag(TRAIN, name) || isConfigFlag(name);
    case 'eval':
      return ownFlag(EVAL, name) || isConfigFlag(name);
    case 'aha':
      return ownFlag(AHA, name) || isConfigFlag(name);
    case 'plan':
      return (
        ownFlag(PLAN, name) || (others.includes('sft') ? sftAccepts(name) : isConfigFlag(name))
      );
    case 'rejection-sample':
      return ownFlag(REJECTION_SAMPLE, name) || isConfigFlag(name);
    case 'recipe':
      return ownFlag(RECIPE, name);
    case 'export-trl':
      return EXPORT_TRL_FLAGS.has(name) || isConfigFlag(name);
    case 'sft':
      return sftAccepts(name);
    case 'adapter':
      return false;
    default:
      throw new Error(`acceptsFlag: '${script}' is not a command-line command`);
  }
}
