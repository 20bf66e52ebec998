// Reward worker: runs one user JavaScript reward source in QuickJS-wasm with its limits (started
// per source by src/rewards/reward-sandbox-browser.ts). Thin shell; the logic lives in
// src/rewards/quickjs-reward-worker.ts. It speaks that file's small message protocol rather than
// comlink so that the Node sandbox (worker_threads) shares it and the host can terminate it.
// The wasm is an asset of the app (the ?url import makes Vite emit it and name its URL, in dev
// and in builds alike): nothing is fetched from another origin and it works offline.
import { newQuickJSWASMModuleFromVariant, newVariant } from 'quickjs-emscripten-core';
import releaseSync from '@jitl/quickjs-wasmfile-release-sync';
import wasmLocation from '@jitl/quickjs-wasmfile-release-sync/wasm?url';
import { serveQuickJsReward } from '../src/rewards/quickjs-reward-worker';

serveQuickJsReward(
  (wasmMemory) =>
    newQuickJSWASMModuleFromVariant(newVariant(releaseSync, { wasmLocation, wasmMemory })),
  {
    post: (message) => self.postMessage(message),
    listen: (handler) => self.addEventListener('message', (e) => handler(e.data)),
  },
);
