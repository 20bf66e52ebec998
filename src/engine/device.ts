// GPU device acquisition for the browser (navigator.gpu) and Node (the `webgpu` package).
// Requests the adapter's maximum limits and the optional features the engine can use, records
// what was granted, and turns device loss into a typed event instead of a silent hang. A GPU error
// nobody captured (out of memory, a validation or internal error) ends the device the same way:
// the submission it hit was dropped, so going on would train on missing or stale data.
import { WebGpuUnavailableError } from './errors';

/** Optional features the kernels use when present (f16 math, subgroup reductions, GPU timers). */
export const OPTIONAL_FEATURES = ['shader-f16', 'subgroups', 'timestamp-query'] as const;
export type OptionalFeature = (typeof OPTIONAL_FEATURES)[number];

/** The limits the engine plans memory and dispatch geometry with. */
export const KEY_LIMITS = [
  'maxStorageBufferBindingSize',
  'maxBufferSize',
  'maxComputeWorkgroupStorageSize',
  'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX',
  'maxComputeWorkgroupsPerDimension',
  'maxStorageBuffersPerShaderStage',
] as const;
export type KeyLimit = (typeof KEY_LIMITS)[number];

export interface AdapterSummary {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  /** True for CPU emulation (SwiftShader, lavapipe, WARP): expect CPU speed, not GPU speed. */
  isSoftware: boolean;
  features: OptionalFeature[];
  limits: Record<KeyLimit, number>;
}

/**
 * Why the device can no longer be used. `reason` is the browser's or driver's loss reason
 * ('destroyed', 'unknown'), or, when an uncaptured GPU error ended it, the error's kind.
 */
export type DeviceLostEvent = { type: 'device-lost'; reason: string; message: string };

/** The reasons an uncaptured GPU error gives (GPUErrorFilter's names). */
export type GpuErrorReason = 'out-of-memory' | 'validation' | 'internal';

const ERROR_CLASSES: Record<string, GpuErrorReason> = {
  GPUOutOfMemoryError: 'out-of-memory',
  GPUValidationError: 'validation',
  GPUInternalError: 'internal',
};

/** The loss an uncaptured GPU error means: its kind (by its class) and its message's first line. */
export function gpuErrorLoss(error: { message?: string } | null | undefined): DeviceLostEvent {
  const kind = error ? ERROR_CLASSES[error.constructor?.name ?? ''] : undefined;
  const firstLine = (error?.message ?? '').split('\n')[0].trim();
  return {
    type: 'device-lost',
    reason: kind ?? 'internal',
    message: firstLine || 'the GPU reported an error without a message',
  };
}
export type DeviceLostListener = (event: DeviceLostEvent) => void;

export interface GpuContext {
  device: GPUDevice;
  adapter: AdapterSummary;
  /** Set once the device is lost; every later engine call should check and refuse. */
  readonly lost: DeviceLostEvent | null;
  onDeviceLost(listener: DeviceLostListener): () => void;
  hasFeature(feature: OptionalFeature): boolean;
  destroy(): void;
}

export interface AcquireOptions {
  powerPreference?: GPUPowerPreference;
  /** Leave out features even if the adapter has them (benchmarks compare with and without). */
  disableFeatures?: OptionalFeature[];
}

const BROWSER_REMEDY =
  'Use a browser with WebGPU (Chrome or Edge 113+, Safari 26+, Firefox 141+ on Windows) over https or ' +
  'http://localhost; in Chrome on Linux enable chrome://flags/#enable-unsafe-webgpu.';

async function getGpu(): Promise<{ gpu: GPU; remedy: string }> {
  const nav = (globalThis as { navigator?: Navigator }).navigator;
  if (nav?.gpu) return { gpu: nav.gpu, remedy: BROWSER_REMEDY };
  // import.meta.env.SSR is statically false in the browser bundle, which drops the Node path (and
  // the `webgpu` package) from it; vitest and the CLI build (ssr) keep it.
  const isNode = import.meta.env.SSR && typeof process !== 'undefined' && !!process.versions?.node;
  if (!isNode) {
    throw new WebGpuUnavailableError(
      'This browser does not expose WebGPU (navigator.gpu is missing).',
      BROWSER_REMEDY,
    );
  }
  // Kept behind a dynamic import so that the browser bundle never pulls in Node modules.
  const nodeGpu = await import('./node-gpu');
  return { gpu: await nodeGpu.createNodeGpu(), remedy: nodeGpu.NODE_WEBGPU_REMEDY };
}

function summarize(adapter: GPUAdapter, device: GPUDevice): AdapterSummary {
  const info = adapter.info;
  const text =
    `${info.vendor} ${info.architecture} ${info.device} ${info.description}`.toLowerCase();
  const limits = {} as Record<KeyLimit, number>;
  for (const key of KEY_LIMITS) limits[key] = Number(device.limits[key]);
  return {
    vendor: info.vendor || 'unknown',
    architecture: info.architecture || 'unknown',
    device: info.device || '',
    description: info.description || '',
    isSoftware:
      /swiftshader|lavapipe|llvmpipe|warp|software/.test(text) ||
      (info.vendor === 'google' && /swiftshader/.test(info.architecture)),
    features: OPTIONAL_FEATURES.filter((f) => device.features.has(f)),
    limits,
  };
}

/** Acquire an adapter and device with maximum limits; throws WebGpuUnavailableError with a remedy. */
export async function acquireGpu(options: AcquireOptions = {}): Promise<GpuContext> {
  const { gpu, remedy } = await getGpu();
  const adapter = await gpu.requestAdapter({
    powerPreference: options.powerPreference ?? 'high-performance',
  });
  if (!adapter)
    throw new WebGpuUnavailableError('WebGPU is present but no GPU adapter was found.', remedy);

  const requiredFeatures = OPTIONAL_FEATURES.filter(
    (f) => adapter.features.has(f) && !options.disableFeatures?.includes(f),
  );
  const requiredLimits: Record<string, number> = {};
  // GPUSupportedLimits exposes its members as prototype getters: `for…in` walks them.
  for (const key in adapter.limits) {
    const value = (adapter.limits as unknown as Record<string, unknown>)[key];
    if (typeof value === 'number') requiredLimits[key] = value;
  }
  let device: GPUDevice;
  try {
    device = await adapter.requestDevice({ requiredFeatures, requiredLimits });
  } catch {
    // Some implementations list limits they refuse to grant at maximum; defaults still work.
    device = await adapter.requestDevice({ requiredFeatures });
  }

  const listeners = new Set<DeviceLostListener>();
  let lost: DeviceLostEvent | null = null;
  let destroyedByUs = false;
  const end = (event: DeviceLostEvent) => {
    if (lost) return; // the first cause is the one reported
    lost = event;
    if (destroyedByUs) return;
    for (const listener of listeners) listener(event);
  };
  void device.lost.then((info) =>
    end({ type: 'device-lost', reason: info.reason ?? 'unknown', message: info.message }),
  );
  device.addEventListener('uncapturederror', (event) => {
    const ended = lost !== null;
    end(gpuErrorLoss((event as GPUUncapturedErrorEvent).error));
    // Its memory goes back at once (after running out, a new device needs it), and every later
    // call on it fails instead of computing on dropped work. Not from inside the event: Dawn
    // calls it within the call that raised the error, and destroying there deadlocks.
    if (!ended) queueMicrotask(() => device.destroy());
  });

  const summary = summarize(adapter, device);
  return {
    device,
    adapter: summary,
    get lost() {
      return lost;
    },
    onDeviceLost(listener) {
      listeners.add(listener);
      if (lost && !destroyedByUs) listener(lost);
      return () => listeners.delete(listener);
    },
    hasFeature: (feature) => summary.features.includes(feature),
    destroy() {
      destroyedByUs = true;
      device.destroy();
    },
  };
}
