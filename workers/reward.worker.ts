// Reward worker: runs user JavaScript rewards, each source in a nested Blob worker it owns, with
// the per-call time limit. Thin comlink wrapper; the logic lives in src/grpo/reward-sandbox*.ts.
import * as Comlink from 'comlink';
import { createRewardWorkerApi } from '../src/grpo/reward-sandbox';
import { createBrowserSandbox } from '../src/grpo/reward-sandbox-browser';

Comlink.expose(createRewardWorkerApi(createBrowserSandbox));
