// Issue 33, item 8 and its property-based tests: documents that come from outside (a recipe JSON,
// a recipe's state.json, an adapter_config.json) are read field by field. A tampered state.json
// gave raw TypeErrors ("Cannot read properties of undefined (reading 'from')", "value.timeline.map
// is not a function") or, with stageIndex 1e9, a recipe reported finished; an adapter_config.json
// with lora_alpha 1e308 loaded (α / r = 2.5e307). Now each refusal names the file and the field.
// The properties: random JSON and mutations of a valid document (a field replaced by any JSON
// value or removed) always give the reader's own error or a valid result, never a TypeError or a
// RangeError, and each document is read quickly (a generous bound for a loaded machine).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { builtinRecipe, parseRecipe, type Recipe } from '../../src/recipes/recipe-spec';
import { parseRecipeState, RecipeStateError } from '../../src/recipes/recipe-state';
import { parsePeftConfig, peftAdapterConfig, PeftConfigError } from '../../src/export/peft-adapter';
import { ModelFileError } from '../../src/formats/errors';
import { LORA_ALPHA_MAX } from '../../src/core/lora';

type Json = unknown;
const json = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

const recipeDoc = json(builtinRecipe('r1')) as unknown as Record<string, unknown>;
const stateDoc = json({
  recipe: recipeDoc,
  stageIndex: 1,
  results: [
    {
      stage: 0,
      name: 'cold-start',
      kind: 'sft',
      steps: 2,
      endStep: 2,
      seconds: 1.5,
      last: { loss: 0.5 },
    },
  ],
  datasets: {},
  timeline: [
    { step: 1, stage: 0, stageStep: 1, metrics: { loss: 1, mean_token_accuracy: null } },
    { step: 2, stage: 0, stageStep: 2, metrics: { loss: 0.5 } },
  ],
});
const adapterDoc = json(
  peftAdapterConfig({ r: 8, alpha: 16, targetModules: 'all-linear', useRslora: false, dropout: 0 }),
);

describe('recipe state.json, field by field', () => {
  const parse = (v: unknown) => parseRecipeState(v, 'run/state.json');

  it('the valid document reads back (NaN for null), and the first stage name fits', () => {
    expect((recipeDoc.stages as { name: string }[])[0].name).toBe('cold-start');
    const s = parse(stateDoc);
    expect(s.stageIndex).toBe(1);
    expect(s.timeline[0].metrics.mean_token_accuracy).toBeNaN();
  });

  it.each([
    [
      'timeline is an object',
      { timeline: {} },
      "run/state.json: 'timeline' must be a list of rows",
    ],
    ['no recipe', { recipe: undefined }, "run/state.json: 'recipe' must be a recipe object"],
    [
      'a stage without kind',
      { recipe: { ...recipeDoc, stages: [{}] } },
      'run/state.json: \'recipe\' is not a valid recipe (recipe: stage 1: "kind"',
    ],
    [
      'stageIndex 1e9',
      { stageIndex: 1e9 },
      "run/state.json: 'stageIndex' must be an integer in [0, 5]",
    ],
    [
      'a row without metrics',
      { timeline: [{ step: 1, stage: 0, stageStep: 1 }] },
      "run/state.json: 'timeline[0].metrics' must be an object",
    ],
    [
      'a formula as a metric',
      { timeline: [{ step: 1, stage: 0, stageStep: 1, metrics: { '=1+2': 1 } }] },
      "'timeline[0].metrics' has a key that is not a metric",
    ],
    [
      'a result of a later stage',
      { results: [{ ...(stateDoc.results as object[])[0], stage: 3 }] },
      "'results[0].stage' must be an integer below stageIndex 1",
    ],
  ])('%s: a RecipeStateError naming the file and the field', (_, change, message) => {
    const doc = { ...stateDoc, ...change } as Record<string, unknown>;
    for (const [k, v] of Object.entries(change)) if (v === undefined) delete doc[k];
    expect(() => parse(doc)).toThrow(RecipeStateError);
    expect(() => parse(doc)).toThrow(message);
  });
});

describe('adapter_config.json', () => {
  it('lora_alpha 1e308 is refused, naming the file and the key', () => {
    const doc = { ...adapterDoc, lora_alpha: 1e308 };
    expect(() => parsePeftConfig(doc)).toThrow(PeftConfigError);
    expect(() => parsePeftConfig(doc)).toThrow(
      `adapter_config.json: 'lora_alpha' must be a number in (0, ${LORA_ALPHA_MAX}], got 1e+308`,
    );
    expect(parsePeftConfig({ ...adapterDoc, lora_alpha: LORA_ALPHA_MAX }).options.alpha).toBe(
      LORA_ALPHA_MAX,
    );
  });
});

// ---- properties -------------------------------------------------------------------------------

/** Every path (object keys and array indices) in a JSON document, the root excluded. */
function paths(doc: Json, prefix: (string | number)[] = []): (string | number)[][] {
  if (typeof doc !== 'object' || doc === null) return [];
  const keys: (string | number)[] = Array.isArray(doc) ? doc.map((_, i) => i) : Object.keys(doc);
  return keys.flatMap((k) => [
    [...prefix, k],
    ...paths((doc as Record<string | number, Json>)[k], [...prefix, k]),
  ]);
}

/** `doc` with the field at each chosen path replaced by `value` (undefined: removed). */
function mutate(doc: Json, edits: { at: number; value: Json | undefined }[]): Json {
  const out = structuredClone(doc);
  for (const { at, value } of edits) {
    const all = paths(out);
    if (all.length === 0) return value;
    const path = all[at % all.length];
    let parent = out as Record<string | number, Json>;
    for (const k of path.slice(0, -1)) parent = parent[k] as Record<string | number, Json>;
    const last = path[path.length - 1];
    if (value === undefined && !Array.isArray(parent)) delete parent[last];
    else parent[last] = value === undefined ? null : value;
  }
  return out;
}

const anyJson = fc.jsonValue({ maxDepth: 3 });
const mutated = (doc: Json) =>
  fc
    .array(fc.record({ at: fc.nat(), value: fc.option(anyJson, { nil: undefined }) }), {
      minLength: 1,
      maxLength: 3,
    })
    .map((edits) => mutate(doc, edits));

/** Reads `doc`; only a result or an error `expected` accepts may come out, quickly. */
function readsSafely(read: (doc: Json) => unknown, expected: (e: unknown) => boolean) {
  return (doc: Json) => {
    const t0 = performance.now();
    try {
      read(doc);
    } catch (e) {
      if (!expected(e)) throw e;
    }
    // A correctness bound (no document makes a reader work for long), with room for a busy CI.
    expect(performance.now() - t0).toBeLessThan(1000);
  };
}

const RUNS = { numRuns: 120 };
const recipeError = (e: unknown) =>
  e instanceof Error &&
  !(e instanceof TypeError) &&
  !(e instanceof RangeError) &&
  e.message.startsWith('recipe: ');

describe("property: untrusted documents give their reader's error or a valid result", () => {
  it('recipe JSON (random and mutated)', () => {
    const read = readsSafely((d) => parseRecipe(d) as Recipe, recipeError);
    fc.assert(fc.property(fc.oneof(anyJson, mutated(recipeDoc)), read), RUNS);
  });

  it('recipe state.json (random and mutated)', () => {
    const read = readsSafely(
      (d) => parseRecipeState(d, 'state.json'),
      (e) => e instanceof RecipeStateError && e.message.startsWith('state.json: '),
    );
    fc.assert(fc.property(fc.oneof(anyJson, mutated(stateDoc)), read), RUNS);
  });

  it('adapter_config.json (random and mutated)', () => {
    const read = readsSafely(
      (d) => parsePeftConfig(d),
      (e) => e instanceof ModelFileError && e.message.startsWith('adapter_config.json: '),
    );
    fc.assert(fc.property(fc.oneof(anyJson, mutated(adapterDoc)), read), RUNS);
  });
});
