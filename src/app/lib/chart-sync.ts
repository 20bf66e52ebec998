// The one selected step and the pointer's step, shared by every line chart on the page (a Svelte
// context the app shell provides with its Session): a chart draws its crosshair at the hovered or
// selected step, a click or an arrow key selects a step, and all charts use the same smoothing.
// A chart outside the shell (no context) keeps a cursor of its own.
import { getContext, setContext } from 'svelte';

export interface ChartSync {
  readonly selectedStep: number | null;
  readonly hoverStep: number | null;
  /** The selection follows the latest step (a chart then draws no line at its right end). */
  readonly follow: boolean;
  /** EMA weight of the drawn lines (lib/chart-rules.ts emaSmooth); 0 = raw. */
  readonly smoothing: number;
  selectStep(step: number | null): void;
  hover(step: number | null): void;
}

const KEY = Symbol('chart-sync');

/** Call during the shell's initialisation: every chart below it shares `sync`. */
export function provideChartSync(sync: ChartSync): void {
  setContext(KEY, sync);
}

/** The shared selection, or undefined outside the shell (call during a chart's initialisation). */
export function chartSync(): ChartSync | undefined {
  return getContext<ChartSync | undefined>(KEY);
}
