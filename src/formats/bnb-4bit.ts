// bitsandbytes 4-bit checkpoints (issue #37; docs/guide/models.md, "4-bit (NF4) bases and
// bitsandbytes checkpoints"): the config's quantization_config, and the safetensors entries
// transformers writes for each 4-bit linear weight (bitsandbytes' QuantState.as_dict(packed=True)):
//   <w>                                  U8  [ceil(n/2), 1]  two NF4 codes per byte, high nibble first
//   <w>.absmax                           F32 [ceil(n/64)]    block scales, or U8 codes when nested
//   <w>.quant_map                        F32 [16]            the NF4 code book
//   <w>.nested_absmax                    F32 [ceil(b/256)]   (nested) scales of the centred absmax
//   <w>.nested_quant_map                 F32 [256]           (nested) the 8-bit dynamic code
//   <w>.quant_state.bitsandbytes__nf4    U8  [k]             UTF-8 JSON: quant_type, blocksize,
//        dtype, shape, and when nested nested_blocksize, nested_dtype, nested_offset
// Pure functions over bytes (no I/O): the loader reads the parts and hands them here. Nested
// statistics are dequantised to f32 at load exactly as bitsandbytes' dequantize_4bit does
// (src/ref/nf4.ts dequantizeAbsmaxNested), so the weights are the values bitsandbytes computes with.
// Every problem is a ModelFileError naming the file and the tensor.

import { dequantizeAbsmaxNested, NF4_BLOCK_SIZE, NF4_CODE, type Nf4Tensor } from '../ref/nf4';
import { ModelFileError } from './errors';
import type { SafetensorsDtype } from './safetensors';

/** A checkpoint's quantisation as this app loads it (only bitsandbytes 4-bit NF4). */
export interface BnbQuantization {
  method: 'bitsandbytes-nf4';
  /** bnb_4bit_use_double_quant: the absmax values are themselves 8-bit quantised. */
  nested: boolean;
  /** Elements per absmax block (64). */
  blockSize: number;
  /** bnb_4bit_compute_dtype as written ('bfloat16', 'float16', 'float32'), or null. */
  computeDtype: string | null;
  /** llm_int8_skip_modules: modules bitsandbytes left unquantised (informational). */
  skipModules: string[];
}

/** One safetensors entry as stored: its dtype, shape and raw little-endian bytes. */
export interface BnbPart {
  dtype: SafetensorsDtype;
  shape: readonly number[];
  bytes: Uint8Array;
}

const SUPPORTED =
  'this app loads a bitsandbytes 4-bit NF4 checkpoint (load_in_4bit with bnb_4bit_quant_type ' +
  "'nf4') or the unquantised model folder (config dtype 'nf4' then quantises it at load)";

/** Display names of the quantisation methods transformers writes in quant_method. */
const METHOD_NAMES: Record<string, string> = {
  gptq: 'GPTQ',
  awq: 'AWQ',
  aqlm: 'AQLM',
  hqq: 'HQQ',
  fp8: 'FP8',
  'compressed-tensors': 'compressed-tensors',
  eetq: 'EETQ',
  bitnet: 'BitNet',
  quanto: 'Quanto',
  torchao: 'torchao',
  gguf: 'GGUF',
  exl2: 'EXL2',
  fbgemm_fp8: 'FBGEMM FP8',
  higgs: 'HIGGS',
  vptq: 'VPTQ',
  spqr: 'SpQR',
  mxfp4: 'MXFP4',
};

const refuse = (file: string, what: string) =>
  new ModelFileError(file, `${what} is not supported: ${SUPPORTED}`);

/**
 * The quantisation a config.json declares: null when it has no quantization_config; the bitsandbytes
 * 4-bit NF4 settings when that is what it declares; anything else is refused with a ModelFileError
 * naming the method (GPTQ, AWQ, bitsandbytes 8-bit, bitsandbytes 4-bit fp4, …).
 */
export function parseQuantizationConfig(
  configJson: Record<string, unknown>,
  file: string,
): BnbQuantization | null {
  const qc = configJson.quantization_config;
  if (qc === undefined || qc === null) return null;
  if (typeof qc !== 'object' || Array.isArray(qc)) {
    throw new ModelFileError(file, 'quantization_config must be an object');
  }
  const q = qc as Record<string, unknown>;
  const rawMethod = q.quant_method;
  // Configs written before transformers named the method carry only load_in_4bit / load_in_8bit.
  const method =
    typeof rawMethod === 'string'
      ? rawMethod.toLowerCase()
      : q.load_in_4bit === true || q.load_in_8bit === true
        ? 'bitsandbytes'
        : undefined;
  if (method === undefined) {
    throw new ModelFileError(
      file,
      `quantization_config has no quant_method (${JSON.stringify(rawMethod)}); ${SUPPORTED}`,
    );
  }
  if (method !== 'bitsandbytes') {
    const name = METHOD_NAMES[method] ?? String(rawMethod);
    throw refuse(file, `quantization_config.quant_method '${String(rawMethod)}' (${name})`);
  }
  if (q.load_in_8bit === true || q._load_in_8bit === true) {
    throw refuse(file, 'bitsandbytes 8-bit (LLM.int8, load_in_8bit)');
  }
  if (q.load_in_4bit !== true && q._load_in_4bit !== true) {
    throw new ModelFileError(
      file,
      `quantization_config says bitsandbytes but neither load_in_4bit nor load_in_8bit; ${SUPPORTED}`,
    );
  }
  const quantType = q.bnb_4bit_quant_type ?? 'fp4'; // BitsAndBytesConfig's default is fp4
  if (quantType !== 'nf4') {
    throw refuse(file, `bitsandbytes 4-bit with bnb_4bit_quant_type '${String(quantType)}'`);
  }
  const storage = q.bnb_4bit_quant_storage;
  if (storage !== undefined && storage !== null && storage !== 'uint8') {
    throw refuse(
      file,
      `bitsandbytes 4-bit with bnb_4bit_quant_storage '${String(storage)}' (only uint8 storage)`,
    );
  }
  const blockSize = q.bnb_4bit_blocksize ?? q.blocksize ?? NF4_BLOCK_SIZE;
  if (blockSize !== NF4_BLOCK_SIZE) {
    throw refuse(
      file,
      `bitsandbytes 4-bit with block size ${JSON.stringify(blockSize)} (only ${NF4_BLOCK_SIZE})`,
    );
  }
  const compute = q.bnb_4bit_compute_dtype;
  const skip = q.llm_int8_skip_modules;
  if (skip !== undefined && skip !== null) {
    if (!Array.isArray(skip) || !skip.every((s) => typeof s === 'string')) {
      throw new ModelFileError(
        file,
        'quantization_config.llm_int8_skip_modules must be a list of names',
      );
    }
  }
  return {
    method: 'bitsandbytes-nf4',
    nested: q.bnb_4bit_use_double_quant === true,
    blockSize: NF4_BLOCK_SIZE,
    computeDtype: typeof compute === 'string' ? compute : null,
    skipModules: Array.isArray(skip) ? (skip as string[]).slice() : [],
  };
}

/** The statistics entries bitsandbytes saves beside a 4-bit weight (suffixes after '<w>.'). */
const COMPONENTS = ['absmax', 'quant_map', 'nested_absmax', 'nested_quant_map'] as const;
const QUANT_STATE = '.quant_state.bitsandbytes__';

/** The name of a weight's packed quant_state entry (present exactly when the weight is 4-bit). */
export const bnbQuantStateName = (weight: string) => `${weight}${QUANT_STATE}nf4`;

/**
 * The weight a bitsandbytes statistics entry belongs to ('…q_proj.weight' for
 * '…q_proj.weight.absmax'), or null when `tensorName` is not such an entry.
 */
export function bnbWeightName(tensorName: string): string | null {
  const qs = tensorName.lastIndexOf(QUANT_STATE);
  if (qs > 0 && /^[a-z0-9]+$/.test(tensorName.slice(qs + QUANT_STATE.length))) {
    return tensorName.slice(0, qs);
  }
  // '.absmax' never matches '….nested_absmax' (the character before 'absmax' is '_' there).
  for (const c of COMPONENTS) {
    if (tensorName.endsWith(`.${c}`)) return tensorName.slice(0, -(c.length + 1));
  }
  return null;
}

/** The 4-bit weights among a checkpoint's tensor names: those with a quant_state entry. */
export function bnbQuantizedWeights(names: Iterable<string>): Set<string> {
  const out = new Set<string>();
  for (const n of names) {
    if (n.endsWith(`${QUANT_STATE}nf4`) || n.endsWith(`${QUANT_STATE}fp4`))
      out.add(bnbWeightName(n)!);
  }
  return out;
}

/** Whether a tensor name is one of bitsandbytes' statistics entries (so the loader can group them). */
export function isBnbComponent(tensorName: string): boolean {
  return bnbWeightName(tensorName) !== null;
}

/**
 * The raw parts of every entry of a whole safetensors file (views into `bytes`, no copy), for
 * assembleNf4Tensor when the file is in memory; a streaming loader builds the same from ranged reads.
 */
export function bnbPartsFromHeader(
  bytes: Uint8Array,
  header: {
    entries: ReadonlyMap<
      string,
      { dtype: SafetensorsDtype; shape: number[]; dataOffsets: [number, number] }
    >;
    dataStart: number;
  },
): Map<string, BnbPart> {
  const out = new Map<string, BnbPart>();
  for (const [name, e] of header.entries) {
    const begin = header.dataStart + e.dataOffsets[0];
    out.set(name, {
      dtype: e.dtype,
      shape: e.shape,
      bytes: bytes.subarray(begin, header.dataStart + e.dataOffsets[1]),
    });
  }
  return out;
}

const product = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
const shapeText = (shape: readonly number[]) => `[${shape.join(', ')}]`;

/** Little-endian f32 values of a part (a copy, so alignment never matters). */
function f32Of(part: BnbPart): Float32Array {
  const out = new Float32Array(part.bytes.byteLength / 4);
  new Uint8Array(out.buffer).set(part.bytes);
  return out;
}

/**
 * One 4-bit weight from its bitsandbytes entries: checks every part (names, dtypes, byte counts,
 * quant_state fields, the shape against `shape` from the model config, quant_map against the NF4
 * code book) and returns it as an Nf4Tensor (codes as stored, f32 absmax; nested statistics
 * dequantised as bitsandbytes does). `parts` maps full tensor names ('<w>', '<w>.absmax', …) to
 * their raw entries; other names in it are ignored.
 */
export function assembleNf4Tensor(
  name: string,
  parts: ReadonlyMap<string, BnbPart>,
  shape: readonly number[],
  quant: BnbQuantization,
  file: string,
): Nf4Tensor {
  const fail = (detail: string, tensor = name) => new ModelFileError(file, detail, tensor);
  const part = (suffix: string, dtype: SafetensorsDtype, required = true): BnbPart | undefined => {
    const full = suffix ? `${name}.${suffix}` : name;
    const p = parts.get(full);
    if (!p) {
      if (required) {
        throw fail(
          `the bitsandbytes 4-bit weight has no '${suffix || 'packed codes'}' entry` +
            (suffix ? ` ('${full}')` : ''),
        );
      }
      return undefined;
    }
    if (p.dtype !== dtype)
      throw fail(`dtype ${p.dtype}, but bitsandbytes stores ${dtype} here`, full);
    if (product(p.shape) * (dtype === 'U8' ? 1 : 4) !== p.bytes.byteLength) {
      throw fail(
        `${p.bytes.byteLength} bytes, but shape ${shapeText(p.shape)} in ${dtype} needs ` +
          `${product(p.shape) * (dtype === 'U8' ? 1 : 4)}`,
        full,
      );
    }
    return p;
  };

  // quant_state: the JSON of the non-tensor fields.
  for (const other of ['fp4', 'int4', 'af4']) {
    if (parts.has(`${name}${QUANT_STATE}${other}`)) {
      throw fail(`bitsandbytes 4-bit with quant_type '${other}' is not supported: ${SUPPORTED}`);
    }
  }
  const qsName = bnbQuantStateName(name);
  const qsPart = part(qsName.slice(name.length + 1), 'U8')!;
  let qs: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(
      new TextDecoder('utf-8', { fatal: true }).decode(qsPart.bytes),
    );
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new Error('not an object');
    qs = parsed as Record<string, unknown>;
  } catch (err) {
    throw fail(
      `quant_state is not a JSON object (${err instanceof Error ? err.message : String(err)})`,
      qsName,
    );
  }
  if (qs.quant_type !== 'nf4') {
    throw fail(`quant_state.quant_type is ${JSON.stringify(qs.quant_type)}, not 'nf4'`, qsName);
  }
  if (qs.blocksize !== quant.blockSize) {
    throw fail(
      `quant_state.blocksize is ${JSON.stringify(qs.blocksize)}, but only ${quant.blockSize} is supported`,
      qsName,
    );
  }
  if (
    !Array.isArray(qs.shape) ||
    qs.shape.length !== shape.length ||
    qs.shape.some((d, i) => d !== shape[i])
  ) {
    throw fail(
      `quant_state.shape is ${JSON.stringify(qs.shape)}, but the model config makes this weight ${shapeText(shape)}`,
      qsName,
    );
  }
  if (qs.dtype !== undefined && !['bfloat16', 'float16', 'float32'].includes(String(qs.dtype))) {
    throw fail(
      `quant_state.dtype ${JSON.stringify(qs.dtype)} is not bfloat16, float16 or float32`,
      qsName,
    );
  }

  const count = product(shape);
  const blocks = Math.ceil(count / quant.blockSize);
  const codesPart = part('', 'U8')!;
  const codeBytes = Math.ceil(count / 2);
  if (codesPart.bytes.byteLength !== codeBytes) {
    throw fail(
      `${codesPart.bytes.byteLength} bytes of 4-bit codes (shape ${shapeText(codesPart.shape)}), ` +
        `but ${shapeText(shape)} needs ${codeBytes} (two per byte)`,
    );
  }

  const quantMapPart = part('quant_map', 'F32')!;
  const quantMap = f32Of(quantMapPart);
  const same =
    quantMap.length === 16 &&
    quantMap.every((v, i) => Object.is(v, NF4_CODE[i]) || (v === 0 && NF4_CODE[i] === 0));
  if (!same) {
    throw fail(
      `quant_map ${shapeText(quantMapPart.shape)} is not bitsandbytes' NF4 code book`,
      `${name}.quant_map`,
    );
  }

  const nestedPresent = parts.has(`${name}.nested_absmax`) || 'nested_offset' in qs;
  let absmax: Float32Array;
  if (!nestedPresent) {
    const a = part('absmax', 'F32')!;
    if (product(a.shape) !== blocks) {
      throw fail(
        `absmax has ${product(a.shape)} values, but ${shapeText(shape)} in blocks of ${quant.blockSize} needs ${blocks}`,
        `${name}.absmax`,
      );
    }
    absmax = f32Of(a);
  } else {
    const a = part('absmax', 'U8')!;
    if (product(a.shape) !== blocks) {
      throw fail(
        `absmax has ${product(a.shape)} 8-bit codes, but ${shapeText(shape)} in blocks of ${quant.blockSize} needs ${blocks}`,
        `${name}.absmax`,
      );
    }
    const nestedBlock = qs.nested_blocksize;
    if (typeof nestedBlock !== 'number' || !Number.isInteger(nestedBlock) || nestedBlock <= 0) {
      throw fail(
        `quant_state.nested_blocksize is ${JSON.stringify(nestedBlock)}, not a positive integer`,
        qsName,
      );
    }
    const offset = qs.nested_offset;
    if (typeof offset !== 'number' || !Number.isFinite(offset)) {
      throw fail(`quant_state.nested_offset is ${JSON.stringify(offset)}, not a number`, qsName);
    }
    if (qs.nested_dtype !== undefined && qs.nested_dtype !== 'float32') {
      throw fail(
        `quant_state.nested_dtype is ${JSON.stringify(qs.nested_dtype)}, not 'float32'`,
        qsName,
      );
    }
    const a2 = part('nested_absmax', 'F32')!;
    const blocks2 = Math.ceil(blocks / nestedBlock);
    if (product(a2.shape) !== blocks2) {
      throw fail(
        `nested_absmax has ${product(a2.shape)} values, but ${blocks} absmax codes in blocks of ${nestedBlock} need ${blocks2}`,
        `${name}.nested_absmax`,
      );
    }
    const code2Part = part('nested_quant_map', 'F32')!;
    if (product(code2Part.shape) !== 256) {
      throw fail(
        `nested_quant_map has ${product(code2Part.shape)} values, not 256`,
        `${name}.nested_quant_map`,
      );
    }
    // The stored map is used as it is: it is what the checkpoint was quantised with (its last bits
    // depend on the torch build that computed create_dynamic_map).
    absmax = dequantizeAbsmaxNested({
      codes: a.bytes,
      absmax2: f32Of(a2),
      code2: f32Of(code2Part),
      offset: Math.fround(offset), // as from_dict: torch.tensor(float(offset)), an f32
      blockSize: nestedBlock,
    });
  }
  for (let b = 0; b < absmax.length; b++) {
    if (!Number.isFinite(absmax[b])) {
      throw fail(
        `absmax of block ${b} is ${absmax[b]}; the checkpoint is damaged`,
        `${name}.absmax`,
      );
    }
  }
  // A copy of the codes, so the result never aliases a file buffer the loader reuses.
  return {
    format: 'nf4',
    count,
    blockSize: quant.blockSize,
    codes: codesPart.bytes.slice(),
    absmax,
  };
}
