// Minimal recipe stages for tests that build recipes by hand: one step each, the smallest data,
// an optional `from`. Options merge over the one-step defaults.
export const sftStage = (name: string, options: object = {}, from?: string) => ({
  kind: 'sft',
  name,
  data: { coldStart: { count: 2 } },
  options: { maxSteps: 1, ...options },
  ...(from ? { from } : {}),
});

export const grpoStage = (name: string, options: object = {}, from?: string) => ({
  kind: 'grpo',
  name,
  options: { steps: 1, ...options },
  ...(from ? { from } : {}),
});

export const rejectionStage = (name: string, from?: string) => ({
  kind: 'rejection-sample',
  name,
  prompts: 2,
  options: { k: 1 },
  ...(from ? { from } : {}),
});
