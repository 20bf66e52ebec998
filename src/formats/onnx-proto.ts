// A minimal protobuf writer for the ONNX messages the exporter needs (ModelProto, GraphProto,
// NodeProto, AttributeProto, TensorProto, ValueInfoProto), with field numbers from onnx/onnx.proto.
// A message is kept as a list of byte chunks so weight data (hundreds of MB) is referenced, not
// copied, until the one final concatenation.

/** Wire types: 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit. */
const VARINT = 0;
const LEN = 2;
const I32 = 5;

function varintBytes(value: number | bigint): Uint8Array {
  let v = BigInt.asUintN(64, BigInt(value)); // negative int64 → two's complement, 10 bytes
  const out: number[] = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return Uint8Array.from(out);
}

const key = (field: number, wire: number) => varintBytes((field << 3) | wire);
const utf8 = new TextEncoder();

export class ProtoMessage {
  readonly parts: Uint8Array[] = [];
  length = 0;

  private push(bytes: Uint8Array) {
    this.parts.push(bytes);
    this.length += bytes.byteLength;
  }

  /** int32/int64/enum/bool field. */
  varint(field: number, value: number | bigint): this {
    this.push(key(field, VARINT));
    this.push(varintBytes(value));
    return this;
  }

  float(field: number, value: number): this {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, value, true);
    this.push(key(field, I32));
    this.push(b);
    return this;
  }

  bytes(field: number, value: Uint8Array): this {
    this.push(key(field, LEN));
    this.push(varintBytes(value.byteLength));
    this.push(value);
    return this;
  }

  string(field: number, value: string): this {
    return this.bytes(field, utf8.encode(value));
  }

  message(field: number, child: ProtoMessage): this {
    this.push(key(field, LEN));
    this.push(varintBytes(child.length));
    for (const p of child.parts) this.push(p);
    return this;
  }

  /** A packed repeated int64 field. */
  packedInt64(field: number, values: readonly (number | bigint)[]): this {
    const inner = new ProtoMessage();
    for (const v of values) inner.push(varintBytes(v));
    return this.message(field, inner);
  }

  finish(): Uint8Array {
    const out = new Uint8Array(this.length);
    let pos = 0;
    for (const p of this.parts) {
      out.set(p, pos);
      pos += p.byteLength;
    }
    return out;
  }
}

/** onnx.TensorProto.DataType values used here. */
export const OnnxDataType = { FLOAT: 1, INT32: 6, INT64: 7 } as const;
export type OnnxDataTypeId = (typeof OnnxDataType)[keyof typeof OnnxDataType];

/** TensorProto with raw little-endian data (fields: dims 1, data_type 2, name 8, raw_data 9). */
export function tensorProto(
  name: string,
  dims: readonly number[],
  data: Float32Array | BigInt64Array | Int32Array,
): ProtoMessage {
  const type =
    data instanceof Float32Array
      ? OnnxDataType.FLOAT
      : data instanceof BigInt64Array
        ? OnnxDataType.INT64
        : OnnxDataType.INT32;
  const t = new ProtoMessage();
  for (const d of dims) t.varint(1, d); // unpacked repeated int64 is valid proto3 input
  t.varint(2, type);
  t.string(8, name);
  t.bytes(9, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  return t;
}

export type AttributeValue =
  | { kind: 'int'; value: number }
  | { kind: 'float'; value: number }
  | { kind: 'ints'; value: readonly number[] }
  | { kind: 'tensor'; value: ProtoMessage };

/** AttributeProto (name 1, f 2, i 3, t 5, ints 8, type 20). */
export function attributeProto(name: string, attr: AttributeValue): ProtoMessage {
  const a = new ProtoMessage().string(1, name);
  switch (attr.kind) {
    case 'float':
      return a.float(2, attr.value).varint(20, 1);
    case 'int':
      return a.varint(3, attr.value).varint(20, 2);
    case 'tensor':
      return a.message(5, attr.value).varint(20, 4);
    case 'ints':
      for (const v of attr.value) a.varint(8, v);
      return a.varint(20, 7);
  }
}

/** NodeProto (input 1, output 2, name 3, op_type 4, attribute 5). */
export function nodeProto(
  opType: string,
  inputs: readonly string[],
  outputs: readonly string[],
  name: string,
  attributes: Record<string, AttributeValue> = {},
): ProtoMessage {
  const n = new ProtoMessage();
  for (const i of inputs) n.string(1, i);
  for (const o of outputs) n.string(2, o);
  n.string(3, name).string(4, opType);
  for (const [k, v] of Object.entries(attributes)) n.message(5, attributeProto(k, v));
  return n;
}

/** ValueInfoProto for a tensor: dims are sizes or symbolic names ('batch_size'). */
export function valueInfoProto(
  name: string,
  elemType: OnnxDataTypeId,
  dims: readonly (number | string)[],
): ProtoMessage {
  const shape = new ProtoMessage();
  for (const d of dims) {
    const dim = new ProtoMessage();
    if (typeof d === 'number') dim.varint(1, d);
    else dim.string(2, d);
    shape.message(1, dim);
  }
  const tensorType = new ProtoMessage().varint(1, elemType).message(2, shape);
  const type = new ProtoMessage().message(1, tensorType);
  return new ProtoMessage().string(1, name).message(2, type);
}

/** GraphProto (node 1, name 2, initializer 5, doc_string 10, input 11, output 12). */
export function graphProto(
  name: string,
  nodes: readonly ProtoMessage[],
  initializers: readonly ProtoMessage[],
  inputs: readonly ProtoMessage[],
  outputs: readonly ProtoMessage[],
  docString?: string,
): ProtoMessage {
  const g = new ProtoMessage();
  for (const n of nodes) g.message(1, n);
  g.string(2, name);
  for (const t of initializers) g.message(5, t);
  if (docString) g.string(10, docString);
  for (const i of inputs) g.message(11, i);
  for (const o of outputs) g.message(12, o);
  return g;
}

/**
 * ModelProto (ir_version 1, producer_name 2, producer_version 3, doc_string 6, graph 7,
 * opset_import 8 with OperatorSetIdProto domain 1 / version 2).
 */
export function modelProto(
  graph: ProtoMessage,
  options: { irVersion: number; opset: number; producerName: string; producerVersion: string },
): ProtoMessage {
  const opset = new ProtoMessage().string(1, '').varint(2, options.opset);
  return new ProtoMessage()
    .varint(1, options.irVersion)
    .string(2, options.producerName)
    .string(3, options.producerVersion)
    .message(7, graph)
    .message(8, opset);
}
