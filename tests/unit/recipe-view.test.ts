// The Recipes view's pure parts (src/app/lib/recipe-view.ts) and LineChart's stage markers: the
// boundaries of a two-stage timeline (a marker half a step before each stage's first step, named
// after it; a rejection-sample stage shares the next stage's), the stage list's progress, the
// timeline series with gaps where a stage has no such metric, a pasted recipe's messages, the
// one-stage SFT recipe of an uploaded JSONL, and the markers drawn in the server-rendered chart.
import { render } from 'svelte/server';
import { describe, expect, it } from 'vitest';
import LineChart from '../../src/app/components/LineChart.svelte';
import {
  describeStage,
  readRecipeText,
  sftRecipe,
  stageLines,
  stageMarkers,
  timelineSeries,
} from '../../src/app/lib/recipe-view';
import {
  builtinRecipe,
  parseRecipe,
  RECIPE_GRPO_STEPS,
  type TimelineRow,
} from '../../src/recipes/recipe-spec';

const twoStage = parseRecipe({
  name: 'two-stage',
  stages: [
    { kind: 'sft', name: 'cold-start', data: { coldStart: { count: 8 } } },
    { kind: 'grpo', name: 'rl', options: { steps: 2 } },
  ],
});
const rows: TimelineRow[] = [
  { step: 1, stage: 0, stageStep: 1, metrics: { loss: 2, mean_token_accuracy: 0.5 } },
  { step: 2, stage: 0, stageStep: 2, metrics: { loss: 1.5, mean_token_accuracy: 0.6 } },
  { step: 3, stage: 1, stageStep: 1, metrics: { loss: 0.1, reward: 0.75, accuracy: 0.25 } },
];

describe('recipe view', () => {
  it('marks where each started stage begins, between its steps', () => {
    expect(stageMarkers(twoStage, rows, 1)).toEqual([
      { x: 0.5, label: 'cold-start' },
      { x: 2.5, label: 'rl' },
    ]);
    expect(stageMarkers(twoStage, rows.slice(0, 1), 0)).toEqual([{ x: 0.5, label: 'cold-start' }]);
    // R1: its rejection stage trains no step, so it begins where the next SFT stage does.
    const r1 = builtinRecipe('r1');
    const r1Rows: TimelineRow[] = [
      { step: 1, stage: 0, stageStep: 1, metrics: {} },
      { step: 2, stage: 1, stageStep: 1, metrics: {} },
      { step: 3, stage: 3, stageStep: 1, metrics: {} },
    ];
    expect(stageMarkers(r1, r1Rows, 3)).toEqual([
      { x: 0.5, label: 'cold-start' },
      { x: 1.5, label: 'reasoning-rl' },
      { x: 2.5, label: 'rejection · sft' },
    ]);
  });

  it('lists the stages with their state and progress', () => {
    const lines = stageLines(twoStage, rows, 1, [], { 0: 2 });
    expect(lines.map((l) => [l.name, l.state, l.done, l.total])).toEqual([
      ['cold-start', 'done', 2, 2],
      ['rl', 'current', 1, 2],
    ]);
    expect(lines[0].description).toBe('SFT on 8 careful cold-start traces, from the loaded model');
    expect(describeStage(builtinRecipe('distill'), 2)).toBe(
      "SFT on the completions 'teacher-samples' kept, from the loaded model (base)",
    );
    expect(describeStage(builtinRecipe('r1'), 1)).toBe(
      `GRPO, ${RECIPE_GRPO_STEPS / 2} steps (aha preset, 16 completions × 2 prompts), from 'cold-start'`,
    );
    // A LoRA stage says so, and how its frozen base is stored.
    const lora = parseRecipe({
      name: 'qlora',
      stages: [
        {
          kind: 'sft',
          name: 'sft',
          data: { coldStart: { count: 4 } },
          options: { usePeft: true, loraR: 8, dtype: 'nf4' },
        },
        { kind: 'grpo', name: 'rl', options: { steps: 2, usePeft: true, dtype: 'bfloat16' } },
      ],
    });
    expect(describeStage(lora, 0)).toBe(
      'SFT on 4 careful cold-start traces, from the loaded model, training LoRA adapters (r 8) on a frozen base stored 4-bit NF4 (QLoRA)',
    );
    expect(describeStage(lora, 1)).toContain(
      "from 'sft', training LoRA adapters (r 16) on a frozen base stored bfloat16",
    );
  });

  it('draws a metric across stages with gaps where a stage has none', () => {
    expect(timelineSeries(rows, 'reward').points.map((p) => p.y)).toEqual([NaN, NaN, 0.75]);
    expect(timelineSeries(rows, 'loss').points.map((p) => [p.x, p.y])).toEqual([
      [1, 2],
      [2, 1.5],
      [3, 0.1],
    ]);
  });

  it('checks a pasted recipe and an uploaded SFT set', () => {
    expect(readRecipeText('{')).toEqual({ error: expect.stringMatching(/^not JSON/) });
    expect(readRecipeText('{"name":"x","stages":[{"kind":"dpo"}]}')).toEqual({
      error: 'recipe: stage 1: "kind" must be one of sft, grpo, rejection-sample, got "dpo"',
    });
    const student = {
      name: 's',
      stages: [
        { kind: 'sft', name: 'st', from: 'model:./small', data: { coldStart: { count: 2 } } },
      ],
    };
    expect(readRecipeText(JSON.stringify(student))).toEqual({
      error: expect.stringContaining(`stage 'st' starts from "model:./small"`),
    });
    const ok = readRecipeText(JSON.stringify(twoStage));
    expect('recipe' in ok && ok.recipe).toEqual(twoStage);

    const jsonl = '{"prompt": "1+1=", "completion": "2"}\n{"prompt": "2+2=", "completion": "4"}\n';
    const options = {
      learningRate: 3e-4,
      numTrainEpochs: 2,
      perDeviceTrainBatchSize: 2,
      maxLength: 64,
    };
    const sft = sftRecipe('my set.jsonl', jsonl, options);
    expect('recipe' in sft && sft.rows).toBe(2);
    expect('recipe' in sft && sft.recipe.stages).toEqual([
      { kind: 'sft', name: 'sft-my-set', from: 'previous', data: { jsonl }, options },
    ]);
    expect(sftRecipe('bad.jsonl', '{"prompt": 1}\n', options)).toEqual({
      error: expect.stringMatching(/^bad\.jsonl line 1: /),
    });
    expect(sftRecipe('e.jsonl', '\n', options)).toEqual({ error: 'e.jsonl has no examples' });
  });

  it('LineChart draws a labelled line per marker and widens the axis to reach it', () => {
    const { body } = render(LineChart, {
      props: {
        title: 'Loss',
        series: [timelineSeries(rows.slice(0, 2), 'loss')],
        markers: [
          { x: 0.5, label: 'cold-start' },
          { x: 2.5, label: 'rl' },
        ],
      },
    });
    const found = [
      ...body.matchAll(/data-testid="chart-marker" data-x="([^"]+)" data-label="([^"]+)"/g),
    ];
    expect(found.map((m) => [Number(m[1]), m[2]])).toEqual([
      [0.5, 'cold-start'],
      [2.5, 'rl'],
    ]);
    expect(body).toMatch(/class="marker-label[^"]*"[^>]*>cold-start</);
    // The cursor still steps through the run's steps only.
    expect(body).toContain('aria-valuemin="1"');
    expect(body).toContain('aria-valuemax="2"');
    const none = render(LineChart, {
      props: { title: 'Loss', series: [timelineSeries(rows, 'loss')] },
    }).body;
    expect(none).not.toContain('chart-marker');
  });
});
