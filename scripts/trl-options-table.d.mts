// Types of scripts/trl-options-table.mjs for tests/unit/trl-options-table.test.ts.
export interface OptionStatus {
  project?: string;
  default?: string;
  status: 'same' | 'differs' | 'not supported';
  note?: string;
}
export interface TrlOptions {
  trl_version: string;
  read_from?: string;
  grpo_config: string[];
  grpo_config_defaults?: Record<string, string | null>;
  trl_base_config: string[];
  training_arguments: string[];
}
export const OPTIONS_JSON: string;
export const TABLE_MD: string;
export const STATUS: Record<string, OptionStatus>;
export function generateTable(options: TrlOptions): string;
export function formattedTable(options: TrlOptions): Promise<string>;
