// The bnb-4bit spec's run options and the memory plan's peak for them on the fixture folder
// (tests/fixtures/bnb4bit/nf4-nested) with its 4-bit base: the page must show this number. Pure
// data, so the spec (Playwright's loader, no Vite) can import it; tests/unit/nf4-base.test.ts
// checks the number against planRunMemory, the unit-level plan.
export const BNB_RUN_OPTIONS = {
  perStepPrompts: 1,
  numGenerations: 2,
  maxCompletionLength: 4,
  maxPromptLength: 640,
  evalPrompts: 1,
  usePeft: true,
  loraR: 2,
  loraAlpha: 4,
};

/** planRunMemory(fixture config, BNB_RUN_OPTIONS, …, 'prequantised').peakBytes. */
export const BNB_NF4_PEAK_BYTES = 7_979_608;
