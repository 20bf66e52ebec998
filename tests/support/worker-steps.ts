// The trainer worker in Node tests: a tiny run config for the tiny model, and reading step reports
// (api.step() returns only the step's number, and its report reaches the page once, as the 'step'
// event: src/worker/context.ts), so a test reads the report where the page does.
import type { ConfigInput } from '../../src/grpo/config';
import type { TrainerEvent, UiStepReport } from '../../src/worker/protocol';

/** A Countdown run small enough for SwiftShader: 2 prompts × 3 completions of 4 tokens. */
export const tinyRunConfig = (overrides: Partial<ConfigInput> = {}): Partial<ConfigInput> => ({
  task: 'countdown',
  taskOptions: { numbers: 3, maxNumber: 10, maxTarget: 100 },
  perStepPrompts: 2,
  numGenerations: 3,
  maxPromptLength: 100,
  maxCompletionLength: 4,
  learningRate: 1e-2,
  lrScheduler: 'constant',
  steps: 10,
  saveSteps: 100,
  evalPrompts: 2,
  ...overrides,
});

interface Stepping {
  setListener(callback: ((event: TrainerEvent) => void) | null): void;
  step(): Promise<{ step: number }>;
}

/** Every event of `api` from now on, in order. */
export function listen(api: Pick<Stepping, 'setListener'>): TrainerEvent[] {
  const events: TrainerEvent[] = [];
  api.setListener((e) => events.push(e));
  return events;
}

/** One Step, and its report as the 'step' event delivered it. */
export async function stepReport(api: Stepping, events: TrainerEvent[]): Promise<UiStepReport> {
  const { step } = await api.step();
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i];
    if (e.type === 'step' && e.report.step === step) return e.report;
  }
  throw new Error(`no 'step' event for step ${step}`);
}
