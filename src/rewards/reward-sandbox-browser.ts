// Browser side of the reward sandbox: each user source runs in QuickJS-wasm
// (quickjs-reward-worker.ts) inside a module Worker of its own, workers/reward.worker.ts, which
// Vite bundles with the QuickJS wasm (an asset of the app: nothing is fetched from elsewhere, and
// it works offline). Compiling wasm needs 'wasm-unsafe-eval' in script-src, which the app's CSP
// already has for onnxruntime-web.
//
// What the user code can reach: the ECMAScript built-ins of its QuickJS context and plain-data
// copies of { completion, prompt, problem }; console.* (captured, capped), setTimeout/clearTimeout
// and queueMicrotask that run only within the call's time limit. Not the worker's globals (fetch,
// XMLHttpRequest, WebSocket, WebSocketStream, EventSource, importScripts, import(), indexedDB,
// caches, postMessage …): QuickJS runs the code, not the browser's engine, so containment does not
// depend on the CSP the page or the worker script was served with (tests/e2e/reward-sandbox-escape.
// spec.ts tries each). The worker keeps the interpreter off the UI and trainer threads and can be
// terminated when a native loop ignores the time limit.
//
// Works the same from the page (the "try it" button) and from the trainer worker (nested worker).
// That is why the `new Worker(new URL(…))` lives here, below src/app and src/worker: this is the one
// module outside them that the lint lets start a worker shell (eslint.config.js WORKER_STARTERS).
import {
  WorkerRewardSandbox,
  type SandboxFactory,
  type SandboxOptions,
  type SpawnSandboxWorker,
} from './reward-sandbox';

/** "Uncaught SyntaxError: Unexpected token ';'" → name and message. */
function splitMessage(text: string): { name: string; message: string } {
  const m = /^(?:Uncaught )?([A-Za-z]*Error): ([\s\S]*)$/.exec(text);
  return m ? { name: m[1], message: m[2] } : { name: 'Error', message: text };
}

const spawnBrowserWorker: SpawnSandboxWorker = (events) => {
  const worker = new Worker(new URL('../../workers/reward.worker.ts', import.meta.url), {
    type: 'module',
    name: 'custom-reward',
  });
  worker.onmessage = (e) => events.message(e.data);
  worker.onmessageerror = () =>
    events.error({
      name: 'DataCloneError',
      message: 'a message from the reward worker could not be read',
    });
  worker.onerror = (e) => {
    e.preventDefault();
    const { name, message } = splitMessage(e.message || 'the reward worker failed to start');
    events.error({ name, message });
  };
  return {
    post: (message) => worker.postMessage(message),
    terminate: () => worker.terminate(),
  };
};

function createBrowserSandbox(source: string, options?: SandboxOptions): WorkerRewardSandbox {
  return new WorkerRewardSandbox(source, spawnBrowserWorker, options);
}

export function browserSandboxFactory(options?: SandboxOptions): SandboxFactory {
  return (source) => createBrowserSandbox(source, options);
}
