// Node side of the reward sandbox (CLI, tests): each user source runs in QuickJS-wasm
// (quickjs-reward-worker.ts) inside a worker_threads Worker of its own. The worker is an eval
// worker whose script is serveQuickJsReward's source text plus a require() of the QuickJS engine
// (quickjs-emscripten-core and its release-sync wasm variant), resolved from this module's
// location: node_modules, nothing is downloaded.
//
// What the user code can reach: the ECMAScript built-ins of its QuickJS context and plain-data
// copies of { completion, prompt, problem }; console.* (captured, capped), setTimeout/clearTimeout
// and queueMicrotask that run only within the call's time limit. Not require, process, the file
// system, child processes, the network, environment variables, the worker's postMessage/parentPort
// or any host object: the QuickJS interpreter has none of them (tests/unit/reward-sandbox-escape.
// test.ts tries each). The worker thread is only there so that a native loop QuickJS cannot
// interrupt is ended by terminate(), and it gets an empty environment and a small heap anyway.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { serveQuickJsReward } from './quickjs-reward-worker';
import {
  WorkerRewardSandbox,
  type SandboxFactory,
  type SandboxOptions,
  type SpawnSandboxWorker,
  type WireError,
} from './reward-sandbox';

/** V8 heap of one reward worker (host-side objects only; QuickJS's heap is wasm memory). */
export const NODE_REWARD_HEAP_MB = 64;

let script: string | null = null;

/** The eval worker's script: QuickJS from node_modules + the worker side of the sandbox. */
function workerScript(): string {
  if (script !== null) return script;
  const require = createRequire(import.meta.url);
  const core = require.resolve('quickjs-emscripten-core');
  const variant = require.resolve('@jitl/quickjs-wasmfile-release-sync');
  script = `'use strict';
const { parentPort } = require('node:worker_threads');
const core = require(${JSON.stringify(core)});
const variant = require(${JSON.stringify(variant)}).default;
(${serveQuickJsReward.toString()})(
  (wasmMemory) => core.newQuickJSWASMModuleFromVariant(core.newVariant(variant, { wasmMemory })),
  { post: (m) => parentPort.postMessage(m), listen: (f) => parentPort.on('message', f) },
);
`;
  return script;
}

function wireError(e: unknown): WireError {
  if (!(e instanceof Error)) return { name: null, message: String(e) };
  return { name: e.name, message: e.message };
}

export const spawnNodeWorker: SpawnSandboxWorker = (events) => {
  const worker = new Worker(workerScript(), {
    eval: true,
    env: {},
    resourceLimits: { maxOldGenerationSizeMb: NODE_REWARD_HEAP_MB },
  });
  worker.on('message', (data) => events.message(data));
  worker.on('error', (e) => events.error(wireError(e)));
  worker.on('exit', () => events.exit());
  // An idle reward worker must not keep the CLI alive; a call in flight holds the host's watchdog
  // timer, which does. After the listeners: adding a 'message' listener refs the worker's port
  // again (which is how the old sandbox kept every CLI run with a custom reward from exiting).
  // dispose() terminates the worker.
  worker.unref();
  return {
    post: (message) => worker.postMessage(message),
    terminate: () => void worker.terminate(),
  };
};

export function createNodeSandbox(source: string, options?: SandboxOptions): WorkerRewardSandbox {
  return new WorkerRewardSandbox(source, spawnNodeWorker, options);
}

export function nodeSandboxFactory(options?: SandboxOptions): SandboxFactory {
  return (source) => createNodeSandbox(source, options);
}
