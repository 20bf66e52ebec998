// What the page's stores share: the session they belong to (Shell: its banners, dialogs and busy
// state, and the other stores), the playground's default options and the small types several
// stores hold. Each store mirrors one worker service (src/worker/*-service.ts); the session
// (../session.svelte.ts) composes them.
import type { ConfigInput } from '../../grpo/config';
import type { JsonlDataset } from '../../tasks/jsonl';
import type { DatasetFile, ImportedDataset } from '../../tasks/datasets';
import type { Session } from '../session.svelte';

/** The session as its stores see it. */
export type Shell = Session;

/** Playground defaults for the bundled tiny model on any GPU, even CPU-emulated WebGPU. */
export const PLAYGROUND_DEFAULTS: Partial<ConfigInput> = {
  task: 'countdown',
  taskOptions: { numbers: 3, minNumber: 1, maxNumber: 10, minTarget: 1, maxTarget: 100 },
  perStepPrompts: 2,
  numGenerations: 4,
  maxPromptLength: 64,
  maxCompletionLength: 80,
  learningRate: 2e-4,
  lrScheduler: 'constant',
  steps: 200,
  saveSteps: 25,
  evalPrompts: 16,
};

export interface JsonlImport {
  name: string;
  /** The jsonl task's text: the file's own for native JSONL, else the rows as the importer
   * wrote them (src/tasks/datasets). */
  text: string;
  preview: JsonlDataset;
  /** What the importer found in the files the user picked (layout, mapping, rows), and the
   * files, kept so a new column mapping re-reads them. */
  dataset?: ImportedDataset & { files: readonly DatasetFile[]; userColumns: string };
}

/** An error's message as a banner shows it. */
export function msg(err: unknown): string {
  const m = err instanceof Error ? err.message : String(err);
  return m.replace(/^Error: /, '');
}
