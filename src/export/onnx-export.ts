// Exports the Llama-family model as an ONNX graph (opset 17, standard ops only) for onnxruntime /
// onnxruntime-web / transformers.js. Two interfaces:
//  - plain (default): input_ids (N, T) int64 + attention_mask (N, T) int64 → logits (N, T, V) f32;
//    the graph recomputes the whole sequence (evaluation, scoring).
//  - pastKeyValues: the decoder-with-cache interface Optimum exports and transformers.js generates
//    with: extra inputs past_key_values.{l}.key / .value (N, Hkv, P, D), attention_mask covering
//    P + T columns, extra outputs present.{l}.key / .value (N, Hkv, P + T, D). The first call feeds
//    P = 0 (empty tensors). onnxruntime's JS API cannot leave an input unfed, so one file cannot
//    offer both interfaces.
// Weights are initializers (Linear weights stored transposed, (in, out), so each projection is one
// MatMul; a tied LM head transposes the embedding at run time instead of storing it twice).
// Positions follow the attention mask (cumsum − 1, as transformers does for left-padded batches),
// so left-padded rows give the same logits as unpadded ones on their real tokens.
// Qwen3's q_norm / k_norm are the same RMSNorm ops over the last axis of the (N, T, heads, D)
// query and key, between the reshape and rotary, as transformers' Qwen3Attention.
//
// A LoRA run exports the trained model: `lora` is merged into the base weights first (W + s·B·A).
//
// Legend: N batch, T new tokens, P cached (past) columns, S = P + T mask columns, C hidden,
// I intermediate, V vocab, H heads, Hkv kv-heads, R = H / Hkv heads per kv-head, D head dim.

import {
  hasQkNorm,
  numel,
  parameterSpecs,
  toHfConfig,
  type LlamaConfig,
} from '../core/model-config';
import { ModelFileError } from '../formats/errors';
import { generationConfig } from './hf-export';
import { mergeLoraWeights, type LoraWeights } from './peft-adapter';
import type { GenerationDefaults } from '../formats/hf-folder';
import {
  OnnxDataType,
  graphProto,
  modelProto,
  nodeProto,
  tensorProto,
  valueInfoProto,
  type AttributeValue,
  type ProtoMessage,
} from '../formats/onnx-proto';

export const ONNX_OPSET = 17;
/** IR version 8 is the one that goes with opset 17. */
const ONNX_IR_VERSION = 8;
/** Protobuf messages cannot exceed 2 GiB; bigger models need ONNX external data (not written). */
const PROTOBUF_LIMIT = 2 ** 31 - 1;
/** Added to disallowed attention scores; finite so fully padded query rows give no NaN. */
const MASK_VALUE = -1e9;

export interface OnnxExportInput {
  config: LlamaConfig;
  tensors: ReadonlyMap<string, Float32Array>;
  /** LoRA adapters on `tensors` (the base): exported merged into their projections' weights. */
  lora?: LoraWeights | null;
  producerVersion?: string;
  /** Add past_key_values inputs and present outputs (what transformers.js needs to generate). */
  pastKeyValues?: boolean;
}

/** Graph input / output names of the cache of layer `l` (Optimum's, which transformers.js reads). */
export const pastKeyName = (l: number) => `past_key_values.${l}.key`;
export const pastValueName = (l: number) => `past_key_values.${l}.value`;
export const presentKeyName = (l: number) => `present.${l}.key`;
export const presentValueName = (l: number) => `present.${l}.value`;

class GraphBuilder {
  readonly nodes: ProtoMessage[] = [];
  readonly initializers: ProtoMessage[] = [];
  private count = 0;
  initializerBytes = 0;

  /** Adds a node and returns its (single) output name. */
  op(
    opType: string,
    inputs: string[],
    attributes: Record<string, AttributeValue> = {},
    outputName?: string,
  ): string {
    const out = outputName ?? `${opType.toLowerCase()}_${this.count}`;
    this.nodes.push(nodeProto(opType, inputs, [out], `${opType}_${this.count++}`, attributes));
    return out;
  }

  init(name: string, dims: number[], data: Float32Array | BigInt64Array): string {
    this.initializers.push(tensorProto(name, dims, data));
    this.initializerBytes += data.byteLength;
    return name;
  }

  i64(name: string, values: number[]): string {
    return this.init(name, [values.length], BigInt64Array.from(values.map(BigInt)));
  }

  scalar(name: string, value: number): string {
    return this.init(name, [], Float32Array.of(value));
  }
}

const ints = (value: number[]): AttributeValue => ({ kind: 'ints', value });
const int = (value: number): AttributeValue => ({ kind: 'int', value });

/** (out, in) row-major → (in, out) row-major. */
function transpose(w: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) out[c * rows + r] = w[r * cols + c];
  }
  return out;
}

/** The model as ONNX protobuf bytes. */
export function exportOnnx(input: OnnxExportInput): Uint8Array {
  const { config } = input;
  const {
    hiddenSize: C,
    intermediateSize: I,
    vocabSize: V,
    numHeads: H,
    numKvHeads: Hkv,
    headDim: D,
  } = config;
  const R = H / Hkv;
  const weights = new Map<string, Float32Array>();
  const given = input.lora ? mergeLoraWeights(config, input.tensors, input.lora) : input.tensors;
  for (const spec of parameterSpecs(config)) {
    const data = given.get(spec.name);
    if (!data || data.length !== numel(spec.shape)) {
      throw new ModelFileError(
        'model.onnx',
        data
          ? `has ${data.length} values, shape [${spec.shape.join(', ')}] needs ${numel(spec.shape)}`
          : 'no weights to export',
        spec.name,
      );
    }
    weights.set(spec.name, data);
  }
  const g = new GraphBuilder();
  const w = (name: string) => weights.get(name)!;
  /** A Linear (out, in) weight as a MatMul initializer (in, out). */
  const linear = (x: string, name: string, outDim: number, inDim: number, bias: boolean) => {
    const wt = g.init(
      `${name}.weight.T`,
      [inDim, outDim],
      transpose(w(`${name}.weight`), outDim, inDim),
    );
    const y = g.op('MatMul', [x, wt]);
    return bias ? g.op('Add', [y, g.init(`${name}.bias`, [outDim], w(`${name}.bias`))]) : y;
  };
  const eps = g.scalar('rms_norm_eps', config.rmsNormEps);
  /** RMSNorm over the last axis (width C, or D for Qwen3's per-head q/k norms). */
  const rmsNorm = (x: string, weightName: string, width = C) => {
    const ms = g.op('ReduceMean', [g.op('Mul', [x, x])], { axes: ints([-1]), keepdims: int(1) });
    const inv = g.op('Reciprocal', [g.op('Sqrt', [g.op('Add', [ms, eps])])]);
    return g.op('Mul', [g.op('Mul', [x, inv]), g.init(weightName, [width], w(weightName))]);
  };
  // Qwen3: each head's vector (N, T, heads, D) through its norm before rotary; else unchanged.
  const qkNorm = hasQkNorm(config);
  const headNorm = (x: string, weightName: string) => (qkNorm ? rmsNorm(x, weightName, D) : x);

  const withCache = input.pastKeyValues === true;
  // Column counts as 1-element int64 tensors: T new tokens, S mask columns, P = S − T cached.
  const s0 = g.i64('s0', [0]);
  const s1 = g.i64('s1', [1]);
  const s2 = g.i64('s2', [2]);
  const tDim = g.op('Slice', [g.op('Shape', ['input_ids']), s1, s2, s0]);
  const sDim = g.op('Slice', [g.op('Shape', ['attention_mask']), s1, s2, s0]);
  const pDim = g.op('Sub', [sDim, tDim]);
  // Positions from the mask: cumsum(mask) − 1, clamped at 0 on left padding, for the last T
  // columns. (N, T) float
  const maskF = g.op('Cast', ['attention_mask'], { to: int(OnnxDataType.FLOAT) }); // (N, S)
  const axis1 = g.i64('axis_1', [1]);
  const cum = g.op('CumSum', [maskF, axis1]);
  const one = g.scalar('one', 1);
  const zero = g.scalar('zero', 0);
  const posAll = g.op('Max', [g.op('Sub', [cum, one]), zero]); // (N, S)
  const pos = g.op('Slice', [posAll, pDim, sDim, axis1]); // (N, T)
  // Rotary tables, HF rotate_half layout: angle for frequency j in both halves. (N, T, 1, D)
  const invFreq = new Float32Array(D / 2);
  for (let j = 0; j < D / 2; j++) invFreq[j] = 1 / config.ropeTheta ** ((2 * j) / D);
  const axis2 = g.i64('axis_2', [2]);
  const angles = g.op('Mul', [
    g.op('Unsqueeze', [pos, axis2]),
    g.init('rope_inv_freq', [D / 2], invFreq),
  ]); // (N, T, D/2)
  const emb = g.op('Unsqueeze', [g.op('Concat', [angles, angles], { axis: int(-1) }), axis2]);
  const cos = g.op('Cos', [emb]);
  const sin = g.op('Sin', [emb]);
  const halfStart = g.i64('half_start', [0]);
  const halfMid = g.i64('half_mid', [D / 2]);
  const halfEnd = g.i64('half_end', [D]);
  const axis3 = g.i64('axis_3', [3]);
  const rope = (x: string) => {
    // x (N, T, heads, D): x·cos + rotate_half(x)·sin, rotate_half(x) = [−x2, x1]
    const x1 = g.op('Slice', [x, halfStart, halfMid, axis3]);
    const x2 = g.op('Slice', [x, halfMid, halfEnd, axis3]);
    const rotated = g.op('Concat', [g.op('Neg', [x2]), x1], { axis: int(3) });
    return g.op('Add', [g.op('Mul', [x, cos]), g.op('Mul', [rotated, sin])]);
  };

  // Additive attention mask (N, 1, 1, T, S): 0 where key column j ≤ P + query i and j is not
  // padding.
  const ones = g.op('ConstantOfShape', [g.op('Concat', [tDim, sDim], { axis: int(0) })], {
    value: { kind: 'tensor', value: tensorProto('one_value', [1], Float32Array.of(1)) },
  });
  const diagonal = g.op('Squeeze', [pDim, s0]); // scalar P
  const causal = g.op('Trilu', [ones, diagonal], { upper: int(0) }); // (T, S)
  const keyMask = g.op('Unsqueeze', [maskF, g.i64('axes_123', [1, 2, 3])]); // (N, 1, 1, 1, S)
  const allowed = g.op('Mul', [causal, keyMask]);
  const additive = g.op('Mul', [g.op('Sub', [allowed, one]), g.scalar('mask_value', -MASK_VALUE)]);
  const scale = g.scalar('attn_scale', 1 / Math.sqrt(D));

  const shapeNTHD = g.i64('shape_q', [0, 0, Hkv, R, D]); // 0 copies N, T
  const shapeQ = g.i64('shape_q_heads', [0, 0, H, D]);
  const shapeK = Hkv === H ? shapeQ : g.i64('shape_k_heads', [0, 0, Hkv, D]);
  const shapeNTC = g.i64('shape_merge', [0, 0, H * D]);

  let x = g.op(
    'Gather',
    [g.init('model.embed_tokens.weight', [V, C], w('model.embed_tokens.weight')), 'input_ids'],
    {
      axis: int(0),
    },
  ); // (N, T, C)
  for (let l = 0; l < config.numLayers; l++) {
    const p = `model.layers.${l}`;
    const h = rmsNorm(x, `${p}.input_layernorm.weight`);
    const bias = config.attentionBias;
    const qHeads = g.op('Reshape', [linear(h, `${p}.self_attn.q_proj`, H * D, C, bias), shapeQ]);
    const kHeads = g.op('Reshape', [linear(h, `${p}.self_attn.k_proj`, Hkv * D, C, bias), shapeK]);
    const q = rope(headNorm(qHeads, `${p}.self_attn.q_norm.weight`));
    const k = rope(headNorm(kHeads, `${p}.self_attn.k_norm.weight`));
    const v = g.op('Reshape', [linear(h, `${p}.self_attn.v_proj`, Hkv * D, C, bias), shapeK]);
    // Cache layout (N, Hkv, columns, D): the new columns appended to the past ones.
    let keys = g.op('Transpose', [k], { perm: ints([0, 2, 1, 3]) }); // (N, Hkv, T, D)
    let values = g.op('Transpose', [v], { perm: ints([0, 2, 1, 3]) });
    if (withCache) {
      keys = g.op('Concat', [pastKeyName(l), keys], { axis: int(2) }, presentKeyName(l));
      values = g.op('Concat', [pastValueName(l), values], { axis: int(2) }, presentValueName(l));
    } // (N, Hkv, S, D)
    // Grouped-query attention by broadcasting: q (N, Hkv, R, T, D) against k, v (N, Hkv, 1, S, D);
    // head h uses kv-head h / R, as transformers' repeat_kv.
    const qg = g.op('Transpose', [g.op('Reshape', [q, shapeNTHD])], {
      perm: ints([0, 2, 3, 1, 4]),
    });
    const kt = g.op('Transpose', [g.op('Unsqueeze', [keys, s2])], {
      perm: ints([0, 1, 2, 4, 3]),
    }); // (N, Hkv, 1, D, S)
    const vg = g.op('Unsqueeze', [values, s2]); // (N, Hkv, 1, S, D)
    const scores = g.op('Add', [g.op('Mul', [g.op('MatMul', [qg, kt]), scale]), additive]);
    const probs = g.op('Softmax', [scores], { axis: int(-1) }); // (N, Hkv, R, T, S)
    const ctx = g.op('Transpose', [g.op('MatMul', [probs, vg])], { perm: ints([0, 3, 1, 2, 4]) });
    const attn = linear(g.op('Reshape', [ctx, shapeNTC]), `${p}.self_attn.o_proj`, C, H * D, false);
    x = g.op('Add', [x, attn]);
    const h2 = rmsNorm(x, `${p}.post_attention_layernorm.weight`);
    const gate = linear(h2, `${p}.mlp.gate_proj`, I, C, false);
    const up = linear(h2, `${p}.mlp.up_proj`, I, C, false);
    const act = g.op('Mul', [g.op('Mul', [gate, g.op('Sigmoid', [gate])]), up]);
    x = g.op('Add', [x, linear(act, `${p}.mlp.down_proj`, C, I, false)]);
  }
  const hFinal = rmsNorm(x, 'model.norm.weight');
  const head = config.tieWordEmbeddings
    ? g.op('Transpose', ['model.embed_tokens.weight'], { perm: ints([1, 0]) })
    : g.init('lm_head.weight.T', [C, V], transpose(w('lm_head.weight'), V, C));
  g.op('MatMul', [hFinal, head], {}, 'logits');

  if (g.initializerBytes > PROTOBUF_LIMIT - 64 * 1024 * 1024) {
    throw new ModelFileError(
      'model.onnx',
      `weights take ${g.initializerBytes} bytes; a single ONNX protobuf file is limited to 2 GiB ` +
        `(external-data export is not implemented): export safetensors instead`,
    );
  }
  const cacheInputs: ProtoMessage[] = [];
  const cacheOutputs: ProtoMessage[] = [];
  if (withCache) {
    for (let l = 0; l < config.numLayers; l++) {
      for (const name of [pastKeyName(l), pastValueName(l)]) {
        cacheInputs.push(
          valueInfoProto(name, OnnxDataType.FLOAT, ['batch_size', Hkv, 'past_sequence_length', D]),
        );
      }
      for (const name of [presentKeyName(l), presentValueName(l)]) {
        cacheOutputs.push(
          valueInfoProto(name, OnnxDataType.FLOAT, ['batch_size', Hkv, 'total_sequence_length', D]),
        );
      }
    }
  }
  const graph = graphProto(
    'grpo_playground_llama',
    g.nodes,
    g.initializers,
    [
      valueInfoProto('input_ids', OnnxDataType.INT64, ['batch_size', 'sequence_length']),
      valueInfoProto('attention_mask', OnnxDataType.INT64, [
        'batch_size',
        withCache ? 'total_sequence_length' : 'sequence_length',
      ]),
      ...cacheInputs,
    ],
    [
      valueInfoProto('logits', OnnxDataType.FLOAT, ['batch_size', 'sequence_length', V]),
      ...cacheOutputs,
    ],
    `${config.architecture}: ${config.numLayers} layers, hidden ${C}, heads ${H}/${Hkv}, vocab ${V}` +
      (withCache ? ', with past_key_values' : ''),
  );
  return modelProto(graph, {
    irVersion: ONNX_IR_VERSION,
    opset: ONNX_OPSET,
    producerName: 'grpo-playground',
    producerVersion: input.producerVersion ?? '0.1.0',
  }).finish();
}

export interface OnnxFolderInput {
  config: LlamaConfig;
  tensors: ReadonlyMap<string, Float32Array>;
  /** LoRA adapters on `tensors`: exported merged (exportOnnx's `lora`). */
  lora?: LoraWeights | null;
  /** Copied verbatim (tokenizer.json, tokenizer_config.json …): transformers.js needs them. */
  tokenizerFiles?: ReadonlyMap<string, Uint8Array>;
  generation?: Partial<GenerationDefaults>;
  producerVersion?: string;
}

/**
 * A folder transformers.js loads as-is (AutoModelForCausalLM / pipeline('text-generation') with
 * local files): config.json, generation_config.json, the tokenizer files and onnx/model.onnx with
 * past_key_values. config.json says "transformers.js_config": { dtype: 'fp32' } because the
 * library's wasm default is the 8-bit onnx/model_quantized.onnx, which is not written.
 */
export function exportOnnxFolder(input: OnnxFolderInput): Map<string, Uint8Array> {
  const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value, null, 2) + '\n');
  const files = new Map<string, Uint8Array>();
  files.set(
    'config.json',
    json({
      ...toHfConfig(input.config),
      use_cache: true,
      'transformers.js_config': { dtype: 'fp32', use_external_data_format: false },
    }),
  );
  files.set('generation_config.json', json(generationConfig(input.config, input.generation)));
  for (const [name, bytes] of input.tokenizerFiles ?? []) files.set(name, bytes);
  files.set(
    'onnx/model.onnx',
    exportOnnx({
      config: input.config,
      tensors: input.tensors,
      lora: input.lora,
      producerVersion: input.producerVersion,
      pastKeyValues: true,
    }),
  );
  return files;
}
