// The benchmark page (bench/browser/index.html), bundled by the Node driver with Vite and served from
// 127.0.0.1: exposes window.grpoBench for Playwright to call. Everything is bundled from
// node_modules (our engine, tfjs + its WebGPU backend, onnxruntime-web, transformers.js); ORT's wasm
// files are served by the driver under /ort/ and the models of the forward / sampling / training
// benchmarks (model-bench.ts) under /bench-models/. Nothing is fetched from the network.
import { MatmulKernel } from '../../src/kernels/matmul';
import { MatmulTileVariant } from '../kernels/matmul-tiles';
import { readF32, uploadStorageBuffer, createStorageBuffer } from '../../src/engine/buffers';
import { matmulRef } from '../../src/ref/matmul';
import {
  graphProto,
  modelProto,
  nodeProto,
  valueInfoProto,
  OnnxDataType,
} from '../../src/formats/onnx-proto';
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-webgpu';
import * as ort from 'onnxruntime-web/webgpu';
import {
  configureTransformers,
  forward,
  hfFetched,
  ourEngineFor,
  sampling,
  training,
  transformersVersion,
  unloadModel,
} from './model-bench';
import { OUR_ENGINE, type OurPath } from './paths';
import {
  repeatsFor,
  type EngineName,
  type MatmulMeasurement,
  type MatmulRunConfig,
  type MatmulShape,
} from './shapes';

export interface BrowserInfo {
  userAgent: string;
  hardwareConcurrency: number;
  crossOriginIsolated: boolean;
  adapter: {
    vendor: string;
    architecture: string;
    device: string;
    description: string;
    features: string[];
    limits: Record<string, number>;
  };
  versions: Record<string, string>;
}

const log = (line: string) => console.log(`[page] ${line}`);

async function info(): Promise<BrowserInfo> {
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new Error('navigator.gpu.requestAdapter() returned null');
  const limits: Record<string, number> = {};
  for (const key in adapter.limits) {
    const v = (adapter.limits as unknown as Record<string, unknown>)[key];
    if (typeof v === 'number') limits[key] = v;
  }
  return {
    userAgent: navigator.userAgent,
    hardwareConcurrency: navigator.hardwareConcurrency,
    crossOriginIsolated: globalThis.crossOriginIsolated,
    adapter: {
      vendor: adapter.info.vendor,
      architecture: adapter.info.architecture,
      device: adapter.info.device,
      description: adapter.info.description,
      features: [...adapter.features].map(String).sort(),
      limits,
    },
    versions: {
      tfjs: tf.version_core,
      'onnxruntime-web': ort.env.versions.web ?? 'unknown',
      '@huggingface/transformers': transformersVersion(),
    },
  };
}

/** Seeded uniform values in [-1, 1) (xorshift32): every engine sees the same operands. */
function uniform(n: number, seed: number): Float32Array<ArrayBuffer> {
  const out = new Float32Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = ((x >>> 0) / 2 ** 32) * 2 - 1;
  }
  return out;
}

function relError(out: Float32Array, ref: Float32Array): number {
  let maxDiff = 0;
  let maxRef = 0;
  for (let i = 0; i < ref.length; i++) {
    maxDiff = Math.max(maxDiff, Math.abs(out[i] - ref[i]));
    maxRef = Math.max(maxRef, Math.abs(ref[i]));
  }
  return out.length === ref.length ? maxDiff / Math.max(maxRef, 1e-30) : Infinity;
}

/** One engine's matmul on GPU-resident (or, for wasm, engine-held) operands. */
interface Runner {
  /** Runs `repeats` matmuls and reads the last output back (the sync point). */
  run(repeats: number): Promise<Float32Array>;
  dispose(): Promise<void> | void;
}

interface Operands {
  shape: MatmulShape;
  a: Float32Array<ArrayBuffer>; // stored (M, K), or (K, M) when transA
  b: Float32Array<ArrayBuffer>; // stored (K, N), or (N, K) when transB
  aDims: [number, number];
  bDims: [number, number];
}

/** Our kernel as shipped on one path, or a tile-shape variant (threads per workgroup along x, y). */
async function oursRunner(
  op: Operands,
  path: OurPath,
  variant?: { wgX: number; wgY: number },
): Promise<Runner> {
  const engine = await ourEngineFor(path);
  const { M, N, K, transA, transB } = op.shape;
  const kernel = variant
    ? new MatmulTileVariant(engine.device, engine.pipelines, variant.wgX, variant.wgY)
    : new MatmulKernel(engine.device, engine.pipelines);
  const a = uploadStorageBuffer(engine.device, op.a, 'bench.a');
  const b = uploadStorageBuffer(engine.device, op.b, 'bench.b');
  const c = createStorageBuffer(engine.device, M * N * 4, 'bench.c'); // (M, N)
  return {
    async run(repeats) {
      await engine.run(async (enc) => {
        for (let r = 0; r < repeats; r++) kernel.encode(enc, { a, b, c, M, N, K, transA, transB });
      }, 'bench.matmul');
      return readF32(engine.device, c, M * N);
    },
    dispose() {
      a.destroy();
      b.destroy();
      c.destroy();
    },
  };
}

async function tfjsRunner(op: Operands): Promise<Runner> {
  if (tf.getBackend() !== 'webgpu') {
    if (!(await tf.setBackend('webgpu'))) throw new Error('tfjs: the webgpu backend did not start');
    await tf.ready();
  }
  const { transA, transB } = op.shape;
  const a = tf.tensor2d(op.a, op.aDims);
  const b = tf.tensor2d(op.b, op.bDims);
  return {
    async run(repeats) {
      let c: tf.Tensor | null = null;
      for (let r = 0; r < repeats; r++) {
        c?.dispose();
        c = tf.matMul(a, b, transA, transB);
      }
      const out = (await c!.data()) as Float32Array;
      c!.dispose();
      return out;
    },
    dispose() {
      a.dispose();
      b.dispose();
    },
  };
}

/** A one-node ONNX model: Y = Gemm(A, B) with the transposes as attributes (opset 17). */
function gemmModel(op: Operands): Uint8Array {
  const { M, N, transA, transB } = op.shape;
  const graph = graphProto(
    'bench_gemm',
    [
      nodeProto('Gemm', ['A', 'B'], ['Y'], 'gemm', {
        transA: { kind: 'int', value: transA ? 1 : 0 },
        transB: { kind: 'int', value: transB ? 1 : 0 },
      }),
    ],
    [],
    [
      valueInfoProto('A', OnnxDataType.FLOAT, op.aDims),
      valueInfoProto('B', OnnxDataType.FLOAT, op.bDims),
    ],
    [valueInfoProto('Y', OnnxDataType.FLOAT, [M, N])],
  );
  return modelProto(graph, {
    irVersion: 8,
    opset: 17,
    producerName: 'grpo-playground-bench',
    producerVersion: '0',
  }).finish();
}

async function ortRunner(op: Operands, provider: 'webgpu' | 'wasm'): Promise<Runner> {
  const session = await ort.InferenceSession.create(gemmModel(op), {
    executionProviders: [provider],
    graphOptimizationLevel: 'all',
    ...(provider === 'webgpu' ? { preferredOutputLocation: 'gpu-buffer' as const } : {}),
  });
  let feeds: Record<string, ort.Tensor>;
  const owned: GPUBuffer[] = [];
  if (provider === 'webgpu') {
    // Inputs live on ORT's device, as a model's weights and activations would: no upload per run.
    const device = (await ort.env.webgpu.device) as GPUDevice;
    const gpuTensor = (data: Float32Array<ArrayBuffer>, dims: [number, number]) => {
      const buffer = device.createBuffer({
        size: data.byteLength,
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
      });
      device.queue.writeBuffer(buffer, 0, data);
      owned.push(buffer);
      return ort.Tensor.fromGpuBuffer(buffer, { dataType: 'float32', dims });
    };
    feeds = { A: gpuTensor(op.a, op.aDims), B: gpuTensor(op.b, op.bDims) };
  } else {
    feeds = {
      A: new ort.Tensor('float32', op.a, op.aDims),
      B: new ort.Tensor('float32', op.b, op.bDims),
    };
  }
  return {
    async run(repeats) {
      let y: ort.Tensor | null = null;
      for (let r = 0; r < repeats; r++) {
        y?.dispose();
        y = (await session.run(feeds)).Y;
      }
      const out = (await y!.getData(true)) as Float32Array;
      return out;
    },
    async dispose() {
      await session.release();
      for (const b of owned) b.destroy();
    },
  };
}

function makeRunner(engine: EngineName, op: Operands): Promise<Runner> {
  switch (engine) {
    case OUR_ENGINE.gpu:
      return oursRunner(op, 'gpu');
    case OUR_ENGINE.emulation:
      return oursRunner(op, 'emulation');
    case 'ours emulation 16×64':
      return oursRunner(op, 'emulation', { wgX: 16, wgY: 4 });
    case 'ours emulation 32×32':
      return oursRunner(op, 'emulation', { wgX: 8, wgY: 8 });
    case 'tfjs-webgpu':
      return tfjsRunner(op);
    case 'ort-webgpu':
      return ortRunner(op, 'webgpu');
    case 'ort-wasm':
      return ortRunner(op, 'wasm');
  }
}

async function matmul(config: MatmulRunConfig): Promise<MatmulMeasurement[]> {
  ort.env.wasm.wasmPaths = '/ort/';
  // One wasm thread: the machine's cores are shared with the emulated GPU.
  ort.env.wasm.numThreads = 1;
  const results: MatmulMeasurement[] = [];
  for (const [si, shape] of config.shapes.entries()) {
    const { M, N, K, transA, transB } = shape;
    const op: Operands = {
      shape,
      a: uniform(M * K, 1000 + si),
      b: uniform(K * N, 2000 + si),
      aDims: transA ? [K, M] : [M, K],
      bDims: transB ? [N, K] : [K, N],
    };
    const ref = matmulRef(op.a, op.b, { M, N, K, transA, transB });
    const repeats = repeatsFor(shape);
    for (const engine of config.engines) {
      const m: MatmulMeasurement = {
        shape: shape.name,
        engine,
        repeats,
        seconds: [],
        relError: NaN,
      };
      let runner: Runner | null = null;
      try {
        runner = await makeRunner(engine, op);
        // The first run compiles pipelines / kernels: it checks the values and is not timed.
        m.relError = relError(await runner.run(1), ref);
        for (let w = 0; w < config.warmup; w++) await runner.run(repeats);
        for (let r = 0; r < config.runs; r++) {
          const t0 = performance.now();
          await runner.run(repeats);
          m.seconds.push((performance.now() - t0) / 1000);
        }
        const best = Math.min(...m.seconds);
        log(
          `${shape.name} ${engine}: ${((2 * M * N * K * repeats) / best / 1e9).toFixed(3)} GFLOP/s best, rel err ${m.relError.toExponential(1)}`,
        );
      } catch (e) {
        m.error = e instanceof Error ? e.message : String(e);
        log(`${shape.name} ${engine}: FAILED ${m.error}`);
      } finally {
        await runner?.dispose();
      }
      results.push(m);
    }
  }
  return results;
}

configureTransformers();
const api = {
  info,
  matmul,
  forward,
  sampling,
  training,
  unloadModel,
  /** Same-origin paths transformers.js fetched so far. */
  hfFetched: () => [...hfFetched],
};
export type GrpoBenchApi = typeof api;
(globalThis as unknown as { grpoBench: GrpoBenchApi }).grpoBench = api;
document.body.dataset.ready = '1';
