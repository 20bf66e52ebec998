// The CPU fallback (src/worker/cpu-api.ts) on the real bundled model, read from public/ with the app's
// loaders: sampled completions are real text whose rewards are what the built-in reward functions
// give that text, the same draw reproduces the same text, greedy decoding of the bundled model
// writes the reward format, and the chat answers.
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createCpuApi, renderCpuPrompt, rewardMeans } from '../../src/worker/cpu-api';
import type { CpuGroup } from '../../src/worker/cpu-protocol';
import { extractAnswer, formatOk } from '../../src/rewards/rewards';
import { folderSource } from '../../src/formats/model-source';
import { formatPrompt } from '../../src/tasks/prompt';
import type { Problem } from '../../src/tasks/types';
import { verifyCountdown } from '../../src/tasks/verify';

const DIR = 'public/models/tiny-reasoner';
const config = {
  task: 'countdown' as const,
  taskOptions: { numbers: 3, minNumber: 1, maxNumber: 10, minTarget: 1, maxTarget: 100 },
  maxCompletionLength: 64,
  seed: 42,
};

describe('CPU fallback API', { timeout: 120_000 }, () => {
  const api = createCpuApi({ modelSource: () => folderSource(DIR) });
  const events: string[] = [];
  api.setListener((e) => events.push(`${e.phase}:${e.file}`));

  it('refuses to sample before the model is loaded', async () => {
    await expect(api.sample({ config, prompts: 1, samples: 1 })).rejects.toThrow(
      /Load the bundled/,
    );
  });

  it('loads the bundled model once, with progress events', async () => {
    const [a, b] = await Promise.all([api.loadModel(), api.loadModel()]);
    expect(a).toEqual(b);
    expect(a.config).toMatchObject({ hiddenSize: 80, numLayers: 4 });
    expect(a.parameterCount).toBeGreaterThan(200_000);
    expect(events).toContain('weights:model.safetensors');
  });

  it('samples completions whose rewards are the built-in rewards of their text', async () => {
    const out = await api.sample({ config, prompts: 3, samples: 2, temperature: 1, draw: 0 });
    expect(out.groups).toHaveLength(3);
    for (const g of out.groups) {
      expect(g.prompt).toContain(g.problem.question);
      expect(g.completions).toHaveLength(2);
      for (const c of g.completions) {
        expect(c.text.length).toBeGreaterThan(0);
        expect(c.tokens).toBeGreaterThan(0);
        expect(c.tokens).toBeLessThanOrEqual(64);
        const format = formatOk(c.text) ? 1 : 0;
        expect(c.rewards.format).toBe(format);
        const answer = extractAnswer(c.text);
        // The verifier's numbers and target, read back from the question text.
        const m = /\[([\d, ]+)\].*equals (\d+)/.exec(g.problem.question)!;
        const nums = m[1].split(',').map(Number);
        const target = Number(m[2]);
        const right = answer !== null && verifyCountdown(answer, nums, target).ok ? 1 : 0;
        expect(c.rewards.accuracy).toBe(right);
        expect(c.total).toBe(format + right);
      }
    }
    expect(out.means.total).toBeCloseTo(
      out.groups.flatMap((g) => g.completions).reduce((s, c) => s + c.total, 0) / 6,
      12,
    );
    // The bundled model writes the format most of the time (99.6% at temperature 1).
    expect(out.means.format).toBeGreaterThan(0.5);

    const again = await api.sample({ config, prompts: 3, samples: 2, temperature: 1, draw: 0 });
    expect(again.groups.map((g) => g.completions.map((c) => c.text))).toEqual(
      out.groups.map((g) => g.completions.map((c) => c.text)),
    );
    const next = await api.sample({ config, prompts: 3, samples: 2, temperature: 1, draw: 1 });
    expect(next.groups.map((g) => g.problem.id)).not.toEqual(out.groups.map((g) => g.problem.id));
  });

  it('greedy decoding (temperature 0) writes the reward format', async () => {
    const out = await api.sample({ config, prompts: 2, samples: 2, temperature: 0 });
    for (const g of out.groups) {
      expect(g.completions[0].text).toBe(g.completions[1].text);
      expect(g.completions[0].rewards.format).toBe(1);
      expect(g.completions[0].finished).toBe(true);
    }
  });

  it('chats with and without the prompt template', async () => {
    const wrapped = await api.chat(
      'Using the numbers [3, 5, 7], create an equation that equals 15',
      {
        maxNewTokens: 64,
        temperature: 0,
        useTemplate: true,
      },
    );
    expect(wrapped.prompt).toContain('User: Using the numbers [3, 5, 7]');
    expect(wrapped.prompt.endsWith('Assistant:')).toBe(true);
    expect(formatOk(wrapped.text)).toBe(true);
    const raw = await api.chat('<think>', { maxNewTokens: 8, temperature: 1, useTemplate: false });
    expect(raw.prompt).toBe('<think>');
    expect(raw.tokens).toBeGreaterThan(0);
  });

  it('one request at a time', async () => {
    const first = api.sample({ config, prompts: 1, samples: 1 });
    await expect(api.sample({ config, prompts: 1, samples: 1 })).rejects.toThrow(/busy/);
    await first;
  });
});

describe(
  "CPU fallback: the chat template gets the run's thinking switch",
  { timeout: 120_000 },
  () => {
    // The bundled model's folder (its weights and tokenizer) with a chat template added to its
    // tokenizer_config.json: Qwen3's enable_thinking test in the generation prompt (an empty think
    // block when the switch is false), after the user turn only, so that the prompt fits the
    // model's 128 positions.
    const TEMPLATE =
      "{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}{% endif %}{% endfor %}" +
      '{% if add_generation_prompt %} Assistant:{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}';
    const dir = mkdtempSync(join(tmpdir(), 'cpu-think-'));
    for (const f of [
      'config.json',
      'generation_config.json',
      'model.safetensors',
      'tokenizer.json',
    ])
      copyFileSync(join(DIR, f), join(dir, f));
    const tc = JSON.parse(readFileSync(join(DIR, 'tokenizer_config.json'), 'utf8'));
    writeFileSync(
      join(dir, 'tokenizer_config.json'),
      JSON.stringify({ ...tc, chat_template: TEMPLATE }),
    );
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const api = createCpuApi({ modelSource: () => folderSource(dir) });
    const EMPTY_THINK = ' Assistant:<think>\n\n</think>\n\n';

    it('chat passes enableThinking to the template (false: an empty think block; null: none)', async () => {
      await api.loadModel();
      const ask = (enableThinking: boolean | null) =>
        api.chat('What is 1 + 1', {
          maxNewTokens: 1,
          temperature: 0,
          useTemplate: true,
          template: 'chat',
          enableThinking,
        });
      expect((await ask(false)).prompt).toBe(`What is 1 + 1${EMPTY_THINK}`);
      expect((await ask(null)).prompt).toBe('What is 1 + 1 Assistant:');
      expect((await ask(true)).prompt).toBe('What is 1 + 1 Assistant:');
    });

    it("sampling renders the task's prompts with the config's enableThinking", async () => {
      const sample = (enableThinking: boolean | null) =>
        api.sample({
          config: { ...config, template: 'chat', enableThinking },
          prompts: 1,
          samples: 1,
          maxNewTokens: 1,
        });
      const off = await sample(false);
      expect(off.groups[0].prompt.endsWith(EMPTY_THINK)).toBe(true);
      expect(off.groups[0].prompt).toContain(off.groups[0].problem.question);
      const unset = await sample(null);
      expect(unset.groups[0].prompt.endsWith(' Assistant:')).toBe(true);
    });
  },
);

describe('CPU fallback helpers', () => {
  it('renders text prompts and refuses chat without a template', () => {
    const problem: Problem = {
      id: 'x',
      task: 'countdown',
      question: 'What is 1 + 1',
      reference: '2',
      verifier: { kind: 'none' },
    };
    const tok = {
      encode: (t: string) => [...t].map((ch) => ch.charCodeAt(0)),
      hasChatTemplate: false,
      applyChatTemplate: () => '',
      encodeChat: () => [],
    };
    const text = renderCpuPrompt(formatPrompt(problem, 'r1-zero'), tok);
    expect(text.text).toContain('User: What is 1 + 1. Assistant:');
    expect(text.ids).toHaveLength(text.text.length);
    expect(() => renderCpuPrompt(formatPrompt(problem, 'chat'), tok)).toThrow(/chat template/);
  });

  it('averages each reward where it applied', () => {
    const c = (format: number, accuracy: number | null) => ({
      text: '',
      tokens: 1,
      finished: true,
      total: format + (accuracy ?? 0),
      rewards: { format, accuracy },
      reflects: false,
    });
    const groups: CpuGroup[] = [
      {
        problem: { id: 'a', question: '', reference: null },
        prompt: '',
        completions: [c(1, 1), c(0, null)],
      },
      { problem: { id: 'b', question: '', reference: null }, prompt: '', completions: [c(1, 0)] },
    ];
    const m = rewardMeans(groups);
    expect(m.format).toBeCloseTo(2 / 3, 12);
    expect(m.accuracy).toBeCloseTo(0.5, 12);
    expect(m.total).toBeCloseTo(1, 12);
    expect(rewardMeans([]).total).toBeNaN();
  });
});
