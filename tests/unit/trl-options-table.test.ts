// docs/trl-options.md is what scripts/trl-options-table.mjs generates from trl/trl_options.json,
// and the script's project side (option names and defaults) agrees with src/grpo/config.ts.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_SCHEMA, configSchemaRows } from '../../src/grpo/config';
import {
  formattedTable,
  OPTIONS_JSON,
  STATUS,
  TABLE_MD,
  type TrlOptions,
} from '../../scripts/trl-options-table.mjs';

const options = JSON.parse(readFileSync(OPTIONS_JSON, 'utf8')) as TrlOptions;

describe('docs/trl-options.md', () => {
  it('is the generated table (run node scripts/trl-options-table.mjs after changing either side)', async () => {
    expect(readFileSync(TABLE_MD, 'utf8')).toBe(await formattedTable(options));
  });

  it('lists every GRPOConfig option of trl_options.json with its TRL default', () => {
    const text = readFileSync(TABLE_MD, 'utf8');
    for (const name of options.grpo_config) expect(text).toContain(`| \`${name}\``);
    expect(Object.keys(options.grpo_config_defaults ?? {}).sort()).toEqual(
      [...options.grpo_config].sort(),
    );
  });

  it('names project options that exist, with their defaults', () => {
    for (const [trl, entry] of Object.entries(STATUS)) {
      if (!entry.project) continue;
      const spec = CONFIG_SCHEMA[entry.project as keyof typeof CONFIG_SCHEMA];
      expect(spec, `${trl} → ${entry.project}`).toBeDefined();
      expect(JSON.parse(entry.default!), `${trl} default`).toEqual(spec.default);
    }
  });

  it('every option the config maps to a TRL name has that name’s row', () => {
    for (const row of configSchemaRows()) {
      if (row.trl === null) continue;
      expect(STATUS[row.trl]?.project, row.trl).toBe(row.key);
    }
  });
});
