// The page shows the option warnings the command line prints (issue 33, item 9's leftover): a value
// outside its option's usual range (the config schema's `sane`: max_grad_norm 0, a learning rate
// above 0.01, a temperature above 2, epsilon above 0.5) is accepted, and the options store says so
// per option (OptionsStore.warnings, the same text as configWarnings); the Trainer options form
// (rendered with Svelte's server renderer) puts it as a text line under the field, tied to the field
// by aria-describedby, and counts a group's warnings in its summary so a folded group shows them.
import { describe, expect, it } from 'vitest';
import { render } from 'svelte/server';
import type * as Comlink from 'comlink';
import OptionsPanel from '../../src/app/components/OptionsPanel.svelte';
import { Session } from '../../src/app/session.svelte';
import { configWarnings } from '../../src/grpo/config';
import type { TrainerApi } from '../../src/worker/trainer-api';

/** The constructor only keeps the API; these tests call nothing on it. */
const api = {} as Comlink.Remote<TrainerApi>;

const GRAD_NORM_WARNING =
  'max grad norm 0 is outside the usual range (> 0): gradient clipping is off: one large gradient moves the weights unbounded';

describe('option warnings in the page', () => {
  it('the options store has a warning per unusual option, following the draft', () => {
    const session = new Session(api);
    expect(session.options.warnings).toEqual({});
    session.options.draft.maxGradNorm = 0;
    session.options.draft.learningRate = 0.5;
    expect(session.options.warnings).toEqual({
      learningRate:
        'learning rate 0.5 is outside the usual range (≤ 0.01): far above GRPO (1e-6) and LoRA (1e-4) rates; runs diverge',
      maxGradNorm: GRAD_NORM_WARNING,
    });
    // Accepted: the draft still resolves, and the text is the command line's (other label).
    expect(session.options.configError).toBeNull();
    expect(configWarnings(session.options.resolved!)).toEqual([
      expect.stringMatching(/^learningRate 0.5 is outside/),
      expect.stringMatching(/^maxGradNorm 0 is outside/),
    ]);
    session.options.draft.maxGradNorm = 1;
    session.options.draft.learningRate = NaN; // an emptied field: refused, not warned about
    expect(session.options.warnings).toEqual({});
  });

  it('the form shows the warning under its field, described by it, and counts it when folded', () => {
    const session = new Session(api);
    const before = render(OptionsPanel, { props: { session } }).body;
    expect(before).not.toContain('option-warning');
    expect(before).not.toContain('unusual value');

    session.options.draft.maxGradNorm = 0;
    session.options.draft.temperature = 3;
    const body = render(OptionsPanel, { props: { session } }).body.replace(/\s+/g, ' ');
    // The field points at its warning line, which holds the store's text.
    expect(body).toMatch(/<input[^>]*id="opt-maxGradNorm"[^>]*>/);
    const input = body.match(/<input[^>]*id="opt-maxGradNorm"[^>]*>/)![0];
    expect(input).toContain('aria-describedby="opt-maxGradNorm-warning"');
    const line = body.match(/<p[^>]*id="opt-maxGradNorm-warning"[^>]*>(.*?)<\/p>/);
    expect(line).not.toBeNull();
    expect(line![1].replace(/<[^>]*>/g, '').replace(/^ ?⚠ ?/, '')).toBe(GRAD_NORM_WARNING.trim());
    expect(body).toContain('id="opt-temperature-warning"');
    // Fields without a warning describe nothing.
    const epsilon = body.match(/<input[^>]*id="opt-epsilon"[^>]*>/)![0];
    expect(epsilon).not.toContain('aria-describedby');
    // Sampling (temperature) and Optimizer (max grad norm) each count one.
    expect(body.match(/· 1 unusual value\b/g)).toHaveLength(2);
  });
});
