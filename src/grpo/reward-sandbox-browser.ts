// Browser side of the reward sandbox: each user source runs in a dedicated Worker started from a
// Blob URL whose script is the harness with the source pasted in (reward-sandbox.ts). The app's
// CSP allows `worker-src 'self' blob:` but has no 'unsafe-eval', so the source is never eval'd;
// a Blob worker inherits the page's CSP, so eval/new Function fail inside it as well.
//
// What the user code can reach: a worker's globals only (no window, document or app state). It
// runs with the app's origin, so the harness removes indexedDB, caches, navigator.storage,
// BroadcastChannel, Worker, SharedWorker, importScripts and the network APIs (fetch,
// XMLHttpRequest, WebSocket, EventSource, WebTransport) before it runs.
//
// Where: in the reward worker (workers/reward.worker.ts, which owns the nested Blob workers;
// nested dedicated workers work in Chromium; started by startRewardWorker in custom-reward.ts) or
// directly in a page.
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

export const spawnBlobWorker: SpawnSandboxWorker = (script, events) => {
  const url = URL.createObjectURL(new Blob([script], { type: 'text/javascript' }));
  let worker: Worker;
  try {
    worker = new Worker(url, { name: 'custom-reward' });
  } finally {
    // The worker fetches the blob when it starts; revoking after construction is allowed.
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  }
  worker.onmessage = (e) => events.message(e.data);
  worker.onmessageerror = () =>
    events.error({
      name: 'DataCloneError',
      message: 'a message from the reward worker could not be read',
    });
  worker.onerror = (e) => {
    e.preventDefault();
    const { name, message } = splitMessage(e.message || 'the reward worker failed to start');
    events.error({
      name,
      message,
      ...(e.lineno ? { line: e.lineno } : {}),
      ...(e.colno ? { column: e.colno } : {}),
    });
  };
  return {
    post: (message) => worker.postMessage(message),
    terminate: () => worker.terminate(),
  };
};

export function createBrowserSandbox(
  source: string,
  options?: SandboxOptions,
): WorkerRewardSandbox {
  return new WorkerRewardSandbox(source, 'browser', spawnBlobWorker, options);
}

export function browserSandboxFactory(options?: SandboxOptions): SandboxFactory {
  return (source) => createBrowserSandbox(source, options);
}
