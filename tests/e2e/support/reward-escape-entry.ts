// Browser-side entry of tests/e2e/reward-sandbox-escape.spec.ts: bundled by vite's build() with the
// reward sandbox (and so the reward worker with QuickJS and its wasm), served on the app's origin
// and loaded into the app page, where it publishes what the spec drives on globalThis.
import { startRewardWorker } from '../../../src/rewards/custom-reward';
import { browserSandboxFactory } from '../../../src/rewards/reward-sandbox-browser';

export interface RewardEscapeE2E {
  browserSandboxFactory: typeof browserSandboxFactory;
  startRewardWorker: typeof startRewardWorker;
}

(globalThis as unknown as { __rewardEscapeE2E: RewardEscapeE2E }).__rewardEscapeE2E = {
  browserSandboxFactory,
  startRewardWorker,
};
