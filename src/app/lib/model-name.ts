// The name of a model chosen as local files: what the loaded model is called on the page, in run
// names, in checkpoints and in an exported adapter's adapter_config.json (base_model_name_or_path).
// In order: the folder's name (the first segment of webkitRelativePath when picked as a directory,
// or of the paths inside a drop), else config.json's _name_or_path, else the architecture and size
// (e.g. 'LlamaForCausalLM (1.25 M parameters)'); never a count of files.
import { formatCount } from './format';

/** A chosen file as the page has it: its name, and its path inside the chosen folder if any. */
export interface ChosenFile {
  name: string;
  webkitRelativePath?: string;
}

const clean = (p: string) => p.replace(/\\/g, '/').replace(/^\.?\/+/, '');

/** Each file's path: the drop's `paths` when given (one per file), else webkitRelativePath. */
export function chosenPaths(files: readonly ChosenFile[], paths?: readonly string[]): string[] {
  return files.map((f, i) =>
    clean(paths && paths.length === files.length ? paths[i] : f.webkitRelativePath || f.name),
  );
}

/** The one top folder every file is in ('tiny-reasoner' of 'tiny-reasoner/config.json'), or null. */
export function folderName(files: readonly ChosenFile[], paths?: readonly string[]): string | null {
  const all = chosenPaths(files, paths);
  if (all.length === 0) return null;
  const tops = new Set(all.map((p) => (p.includes('/') ? p.split('/')[0] : '')));
  const [top] = [...tops];
  return tops.size === 1 && top ? top : null;
}

/**
 * config.json's `_name_or_path` (transformers writes the hub id or the folder it loaded from): a
 * hub id ('org/model') as it is, a local path by its last segment; null when absent or empty.
 */
export function nameFromConfig(json: unknown): string | null {
  if (!json || typeof json !== 'object') return null;
  const raw = (json as Record<string, unknown>)._name_or_path;
  if (typeof raw !== 'string') return null;
  const value = raw.trim().replace(/\\/g, '/').replace(/\/+$/, '');
  if (!value) return null;
  const hubId = /^[\w.-]+\/[\w.-]+$/.test(value) && !value.startsWith('.');
  return hubId ? value : (value.split('/').pop() ?? null) || null;
}

/** The last resort: what the model is, from its config.json ('LlamaForCausalLM (1.25 M parameters)'). */
export function describedName(architecture: string, parameterCount: number): string {
  return `${architecture || 'model'} (${formatCount(parameterCount)} parameters)`;
}

/** How the files were chosen, for the Source line ('folder tiny (5 files)', '4 selected files'). */
export function describeChosen(files: readonly ChosenFile[], paths?: readonly string[]): string {
  const n = files.length;
  const count = `${n} file${n === 1 ? '' : 's'}`;
  const folder = folderName(files, paths);
  return folder ? `folder ${folder} (${count})` : `${n} selected file${n === 1 ? '' : 's'}`;
}
