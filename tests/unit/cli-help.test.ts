// The command lines' flags (src/cli/_flags.ts): each command's --help names only flags the
// command parses, and every flag it parses is in its help; --config errors begin with the file's
// path; --reward-file reads a custom reward's source; --steps has an upper bound.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  commandHelp,
  COMMANDS,
  readConfigFile,
  resolveWithFile,
  rewardFiles,
  takeCommandFlags,
  type Command,
} from '../../src/cli/_flags';
import { CONFIG_KEYS, isHelpRequested, MAX_STEPS, parseCliArgs } from '../../src/grpo/config';
import { parseSftArgs, SFT, sftHelp } from '../../src/cli/_sft';
import { resolveSftConfig, SFT_DEFAULTS, SFT_OPTIONS } from '../../src/train/sft-config';

const kebab = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** Whether `command` accepts `--name` (its own flag, a config option, or --help). */
function accepts(command: Command, name: string): boolean {
  if (isHelpRequested([`--${name}`])) return true;
  const { flags, rest } = takeCommandFlags(command, [`--${name}`, 'x']);
  if (flags.get(name)?.[0] === 'x') return true;
  try {
    parseCliArgs(rest);
    return true;
  } catch (e) {
    // A wrong value ('x' for a number) still means the option exists.
    return !/unknown option/.test((e as Error).message);
  }
}

describe('--help promises what the command accepts', () => {
  for (const command of COMMANDS) {
    it(`${command.name}: every flag in the help is parsed, every parsed flag is in the help`, () => {
      const help = commandHelp(command);
      const mentioned = [...new Set([...help.matchAll(/--([a-z][a-z0-9_-]*)/g)].map((m) => m[1]))];
      expect(mentioned.filter((name) => !accepts(command, name))).toEqual([]);
      // One line per flag of the command's own table and per config option, and --help.
      const listed = [...help.matchAll(/^ {2}--([a-z][a-z0-9-]*)/gm)].map((m) => m[1]);
      expect(listed.sort()).toEqual(
        [...command.flags.map((f) => f.name), ...CONFIG_KEYS.map(kebab), 'help'].sort(),
      );
    });
  }

  it('a command flag takes --name value and --name=value; a missing value names the flag', () => {
    const train = COMMANDS.find((c) => c.name === 'train')!;
    const { flags, rest } = takeCommandFlags(train, [
      '--out=runs/a',
      '--steps',
      '3',
      '--reward-file',
      'a=a.js',
      '--reward-file=b=b.js',
    ]);
    expect(flags.get('out')).toEqual(['runs/a']);
    expect(flags.get('reward-file')).toEqual(['a=a.js', 'b=b.js']);
    expect(rest).toEqual(['--steps', '3']);
    expect(() => takeCommandFlags(train, ['--out'])).toThrow('--out needs a value: --out <folder>');
    expect(() => takeCommandFlags(train, ['--out', 'a', '--out', 'b'])).toThrow(
      "--out was given twice ('a' and 'b')",
    );
  });
});

describe('--config errors name the file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'grpo-cli-config-'));
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  it('not JSON, not an object, missing', () => {
    const bad = file('bad.json', '{"steps": 3,}');
    expect(() => readConfigFile(bad)).toThrow(new RegExp(`^${bad}: not valid JSON \\(`));
    const list = file('list.json', '[1]');
    expect(() => readConfigFile(list)).toThrow(
      `${list}: a config file must hold a JSON object of options, got an array`,
    );
    expect(() => readConfigFile(join(dir, 'none.json'))).toThrow(
      `${join(dir, 'none.json')}: cannot read the config file (ENOENT)`,
    );
  });

  it("an unknown key or a wrong value in the file; the flags' own errors stay theirs", () => {
    const path = file('c.json', '{"num_generations": 4}');
    expect(() => resolveWithFile(readConfigFile(path), path, {})).toThrow(
      `${path}: unknown config key 'num_generations' (did you mean 'numGenerations'?)`,
    );
    const typed = file('t.json', '{"numGenerations": "many"}');
    expect(() => resolveWithFile(readConfigFile(typed), typed, {})).toThrow(
      new RegExp(`^${typed}: config 'numGenerations' must be an integer`),
    );
    // A flag overriding the file's bad value wins, and the flag's own error has no file prefix.
    expect(
      resolveWithFile(readConfigFile(typed), typed, { numGenerations: 4 }).numGenerations,
    ).toBe(4);
    expect(() => resolveWithFile({ steps: 3 }, typed, { numGenerations: 1 })).toThrow(
      /^config 'numGenerations' must be ≥ 2/,
    );
  });
});

describe('--reward-file and --steps', () => {
  it('reads the source into customRewards and adds custom:<id> to the rewards', () => {
    const dir = mkdtempSync(join(tmpdir(), 'grpo-cli-reward-'));
    const path = join(dir, 'len.js');
    writeFileSync(path, 'function reward({ completion }) { return completion.length; }');
    expect(rewardFiles([`len=${path}`], {})).toEqual({
      rewards: ['format', 'accuracy', 'custom:len'],
      customRewards: { len: 'function reward({ completion }) { return completion.length; }' },
    });
    expect(rewardFiles([`len=${path}`], { rewards: ['custom:len'] }).rewards).toEqual([
      'custom:len',
    ]);
    const missing = join(dir, 'nope.js');
    expect(() => rewardFiles([`len=${missing}`], {})).toThrow(
      `--reward-file len=${missing}: cannot read ${missing} (ENOENT)`,
    );
    expect(() => rewardFiles(['len.js'], {})).toThrow(
      '--reward-file len.js: expected <id>=<file.js>',
    );
  });

  it('--steps past the limit fails naming the flag or the file', () => {
    expect(parseCliArgs(['--steps', String(MAX_STEPS)]).steps).toBe(MAX_STEPS);
    expect(() => parseCliArgs(['--steps', '10000000'])).toThrow(
      /^--steps 10000000 is more than the limit of 1000000 steps$/,
    );
    expect(() => resolveWithFile({ steps: 10_000_000 }, 'big.json', {})).toThrow(
      /^big\.json: config 'steps' 10000000 is more than the limit of 1000000 steps$/,
    );
  });
});

describe('sft --help promises what sft accepts', () => {
  it('one line per flag and SFT option; each is parsed, in kebab-case and TRL snake_case', () => {
    const help = sftHelp();
    const listed = [...help.matchAll(/^ {2}--([a-z][a-z0-9-]*)/gm)].map((m) => m[1]);
    expect(listed.sort()).toEqual([...SFT.flags.map((f) => f.name), 'help'].sort());
    expect(listed).toEqual(expect.arrayContaining(SFT_OPTIONS.map((o) => kebab(o.key))));
    const mentioned = [...new Set([...help.matchAll(/--([a-z][a-z0-9_-]*)/g)].map((m) => m[1]))];
    for (const name of mentioned.filter((n) => n !== 'help')) {
      for (const spelling of [name, name.replace(/-/g, '_')]) {
        const args = parseSftArgs([`--${spelling}`, 'x']);
        const own = [args.model, args.data, args.out, args.resume, args.columns];
        expect([...own, ...Object.values(args.options)], spelling).toContain('x');
      }
    }
    expect(isHelpRequested(['--help'])).toBe(true);
    expect(() => parseSftArgs(['--num-generations', '4'])).toThrow(
      "unknown argument '--num-generations'",
    );
  });

  it("options resolve to TRL SFTConfig's defaults, and a bad value names the option", () => {
    expect(resolveSftConfig()).toEqual(SFT_DEFAULTS);
    expect(SFT_DEFAULTS.learningRate).toBe(2e-5);
    const { options } = parseSftArgs(['--learning_rate=1e-3', '--max-length', 'null']);
    expect(resolveSftConfig(options)).toMatchObject({ learningRate: 1e-3, maxLength: null });
    expect(resolveSftConfig({ assistant_only_loss: 'true' }).assistantOnlyLoss).toBe(true);
    expect(() => resolveSftConfig({ learningRate: 'fast' })).toThrow(
      'learning_rate: expected a number',
    );
    expect(() => resolveSftConfig({ perDeviceTrainBatchSize: '0' })).toThrow('must be ≥ 1');
    expect(() => resolveSftConfig({ lrSchedulerType: 'step' })).toThrow(
      'linear, cosine or constant',
    );
    expect(() => resolveSftConfig({ numGenerations: 4 })).toThrow(
      "unknown SFT option 'numGenerations'",
    );
  });
});

describe('sft LoRA options', () => {
  it('parse from a command line (comma-separated modules) and a recipe (a list), checked as GRPO checks them', () => {
    const { options } = parseSftArgs([
      ...['--use-peft', 'true', '--lora_r', '8', '--lora-alpha', '16'],
      ...['--lora-target-modules', 'q_proj, v_proj', '--dtype', 'nf4'],
    ]);
    expect(resolveSftConfig(options)).toMatchObject({
      usePeft: true,
      loraR: 8,
      loraAlpha: 16,
      loraTargetModules: ['q_proj', 'v_proj'],
      dtype: 'nf4',
    });
    expect(
      resolveSftConfig({ use_peft: true, lora_target_modules: ['all-linear'] }).loraTargetModules,
    ).toEqual(['all-linear']);
    // Off by default: a full fine-tune, as before.
    expect(SFT_DEFAULTS).toMatchObject({ usePeft: false, dtype: 'float32', loraDropout: 0 });
    expect(() => resolveSftConfig({ dtype: 'nf4' })).toThrow('nf4 needs usePeft');
    expect(() => resolveSftConfig({ dtype: 'int8' })).toThrow('expected one of auto, bfloat16');
    expect(() => resolveSftConfig({ usePeft: true, loraTargetModules: 'qkv' })).toThrow(
      "unknown module 'qkv'",
    );
    expect(() => resolveSftConfig({ usePeft: true, loraDropout: 0.1 })).toThrow(
      'lora_dropout 0.1 is not supported',
    );
    expect(() => resolveSftConfig({ loraAlpha: 0 })).toThrow('lora_alpha: must be > 0');
    expect(() => resolveSftConfig({ loraR: 2048 })).toThrow('lora_r: must be ≤ 1024');
    expect(() => resolveSftConfig({ loraTargetModules: 'q_proj,' })).toThrow(
      'lora_target_modules: expected a list of names',
    );
    // A bare boolean is true, as TRL's parser takes `--use_peft`; a value still works.
    const bare = parseSftArgs(['--use_peft', '--lora-r', '8', '--gradient-checkpointing']).options;
    expect(resolveSftConfig(bare)).toMatchObject({
      usePeft: true,
      loraR: 8,
      gradientCheckpointing: true,
    });
    expect(parseSftArgs(['--use-peft', 'false']).options.usePeft).toBe('false');
  });
});
