// The aha demo's parity: the first step of the 'aha' preset in the browser gives the same metrics
// as the command line. The page (Chromium, WebGPU on SwiftShader, the trainer in its worker) takes
// the preset from the Aha view's button and trains one step from the bundled model; Node runs the
// same preset and seed through the CLI (`dist-cli/train.js`, Dawn's WebGPU on SwiftShader). Both
// sample with the same Philox streams, so the completions, hence every reward, length and
// reflection figure, must be equal; float figures of the update (loss, KL, gradient norm) may
// differ in the last bits between the two WebGPU implementations and are compared with a tolerance.
import { expect, test } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PRESETS } from '../../src/grpo/presets';

const STEP_TIMEOUT = 300_000;
/** Figures decided by the sampled tokens alone: equal on both sides. */
const EXACT = [
  'reward',
  'reward_std',
  'rewards/format/mean',
  'rewards/accuracy/mean',
  'accuracy',
  'format_rate',
  'reflection_rate',
  'completions/mean_length',
  'completions/min_length',
  'completions/max_length',
  'completions/clipped_ratio',
  'frac_reward_zero_std',
  'num_tokens',
];
/** Figures of the update: the same math on two WebGPU implementations. */
const CLOSE = ['loss', 'grad_norm', 'entropy', 'clip_ratio/region_mean'];

type Metrics = Record<string, number>;

function cliFirstStep(): Metrics {
  const work = mkdtempSync(join(tmpdir(), 'grpo-aha-parity-'));
  try {
    execFileSync('npx', ['vite', 'build', '--mode', 'cli', '--logLevel', 'warn'], {
      stdio: 'pipe',
    });
    const configFile = join(work, 'aha.json');
    writeFileSync(configFile, JSON.stringify(PRESETS.aha));
    // One step, no held-out evaluation at the end (the eval split does not touch the train stream).
    execFileSync(
      process.execPath,
      [
        'dist-cli/train.js',
        ...['--config', configFile, '--out', join(work, 'run')],
        ...['--steps', '1', '--eval-prompts', '0'],
      ],
      { stdio: 'pipe', timeout: STEP_TIMEOUT },
    );
    const [first] = readFileSync(join(work, 'run', 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n');
    const row = JSON.parse(first) as { step: number } & Metrics;
    expect(row.step).toBe(1);
    return row;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

test('the first aha-preset step in the browser has the command line metrics', async ({ page }) => {
  test.setTimeout(900_000);
  const cli = cliFirstStep();

  await page.goto('/?test-hooks=1#aha');
  await page.getByTestId('use-aha-preset').click();
  await page.getByTestId('nav-train').click();
  await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
  await page.getByTestId('load-model').click();
  await expect(page.getByTestId('model-loaded')).toBeVisible({ timeout: STEP_TIMEOUT });
  await page.getByRole('button', { name: 'Step', exact: true }).click();
  const history = async () =>
    page.evaluate(() =>
      (
        window as unknown as {
          __grpoTest: { history(): { step: number; metrics: Metrics }[] };
        }
      ).__grpoTest.history(),
    );
  await expect.poll(async () => (await history()).length, { timeout: STEP_TIMEOUT }).toBe(1);
  const [row] = await history();
  expect(row.step).toBe(1);
  const browser = row.metrics;

  console.log(
    `aha preset, step 1, browser / CLI: ` +
      EXACT.concat(CLOSE)
        .map((k) => `${k} ${browser[k]} / ${cli[k]}`)
        .join(', '),
  );
  for (const key of EXACT) {
    expect(typeof cli[key], `CLI ${key}`).toBe('number');
    expect(browser[key], key).toBe(cli[key]);
  }
  for (const key of CLOSE) {
    expect(Number.isFinite(cli[key]), `CLI ${key}`).toBe(true);
    expect(Math.abs(browser[key] - cli[key]), key).toBeLessThanOrEqual(
      1e-4 + 1e-3 * Math.abs(cli[key]),
    );
  }
});
