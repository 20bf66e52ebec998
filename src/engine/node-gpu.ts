// Node-side WebGPU: loads the `webgpu` package (Dawn) and points it at a Vulkan driver.
// On machines without a GPU the SwiftShader Vulkan driver that Debian's `chromium` package ships
// is the one Dawn accepts (Mesa's lavapipe lacks a feature Dawn requires), so we look for it.
import { existsSync } from 'node:fs';
import { paceDawnEventPump } from './node-event-pump';

/** Where Debian and Ubuntu put SwiftShader's Vulkan ICD manifest. */
const SWIFTSHADER_ICD_CANDIDATES = [
  '/usr/lib/chromium/vk_swiftshader_icd.json',
  '/usr/lib/chromium-browser/vk_swiftshader_icd.json',
];

export const NODE_WEBGPU_REMEDY =
  'Install a Vulkan driver: on Debian/Ubuntu without a GPU, `sudo apt-get install chromium libvulkan1` ' +
  '(the engine then uses chromium’s SwiftShader driver); or set VK_ICD_FILENAMES to your GPU’s ICD.';

// Dawn's instance must outlive every adapter and device made from it: if the GPU object is
// garbage-collected while a device still processes events, Dawn dereferences freed memory
// (seen as a SIGSEGV in CallbackTaskManager::Flush). So there is one instance per process, held here.
let nodeGpu: Promise<GPU> | null = null;

/** Returns the process's GPU object (navigator.gpu equivalent) for Node, or throws with a remedy. */
export function createNodeGpu(): Promise<GPU> {
  nodeGpu ??= loadNodeGpu();
  nodeGpu.catch(() => (nodeGpu = null));
  return nodeGpu;
}

async function loadNodeGpu(): Promise<GPU> {
  // An explicitly set driver wins; otherwise prefer SwiftShader when no GPU ICD is configured,
  // because Dawn may otherwise pick a software driver it then rejects.
  if (
    !process.env.VK_ICD_FILENAMES &&
    !process.env.VK_DRIVER_FILES &&
    !process.env.GRPO_USE_SYSTEM_VULKAN
  ) {
    const icd = SWIFTSHADER_ICD_CANDIDATES.find((p) => existsSync(p));
    if (icd) process.env.VK_ICD_FILENAMES = icd;
  }
  let mod: { create: (flags: string[]) => GPU; globals: Record<string, unknown> };
  try {
    mod = (await import('webgpu')) as unknown as typeof mod;
  } catch (err) {
    throw new Error(`Cannot load the 'webgpu' package (${String(err)}). Run \`npm ci\`.`, {
      cause: err,
    });
  }
  // Dawn's pump busy-loops while a GPU promise is pending (node-event-pump.ts);
  // GRPO_DAWN_BUSY_POLL=1 leaves it as it is (to compare, or to rule the pacing out).
  if (process.env.GRPO_DAWN_BUSY_POLL !== '1') paceDawnEventPump();
  // GPUBufferUsage, GPUShaderStage, GPUMapMode … are globals in browsers; Dawn provides them.
  for (const [key, value] of Object.entries(mod.globals)) {
    if (!(key in globalThis)) (globalThis as Record<string, unknown>)[key] = value;
  }
  return mod.create(['backend=vulkan', ...nodeDawnToggles(process.env)]);
}

/**
 * Dawn toggles for the Node engine. Robustness (Tint clamping every storage index and Vulkan's
 * robustBufferAccess) is turned off: every kernel here guards its own reads and writes, and on
 * SwiftShader the clamps cost ~16% of a GRPO step of the bundled model (`node bench/run.mjs
 * --profile --aha`: 11.3 → 9.5 s). The whole test suite runs this way in Node; Chromium keeps
 * robustness, and the e2e aha-parity test checks both give the same metrics.
 * GRPO_WEBGPU_ROBUSTNESS=1 turns it back on (to rule out an out-of-bounds access while debugging).
 */
export function nodeDawnToggles(env: Record<string, string | undefined>): string[] {
  return env.GRPO_WEBGPU_ROBUSTNESS === '1' ? [] : ['enable-dawn-features=disable_robustness'];
}
