// Training a model folder from disk in the Train view, as the specs of user-supplied models do:
// pick the folder under "Local folder", load it, take steps with the Step button, and read the
// run's history through the test hooks (the page needs `test-hooks=1` in its URL for that).
import { expect, type Page } from '@playwright/test';

/** How long a load or a step may take on WebGPU emulated by SwiftShader. */
const STEP_TIMEOUT = 120_000;

/** Picks `dir` as the local model folder and waits until the page names it `name`. */
export async function pickLocalFolder(page: Page, dir: string, name: string): Promise<void> {
  await page.getByRole('radio', { name: 'Local folder' }).check();
  await page.locator('input[type="file"][webkitdirectory]').setInputFiles(dir);
  await expect(page.getByTestId('model-name')).toHaveText(name, { timeout: 60_000 });
}

/** Picks `dir`, loads it, and waits until the model panel says `name` is loaded. */
export async function loadLocalFolder(page: Page, dir: string, name: string): Promise<void> {
  await pickLocalFolder(page, dir, name);
  await page.getByTestId('load-model').click();
  await expect(page.getByTestId('model-loaded')).toContainText(name, { timeout: STEP_TIMEOUT });
}

/** Clicks Step `n` times, each time waiting for the step counter to reach the next step. */
export async function takeSteps(page: Page, n: number): Promise<void> {
  for (let i = 1; i <= n; i++) {
    await page.getByTestId('step').click();
    await expect(page.getByTestId('step-counter')).toContainText(`step ${i}`, {
      timeout: STEP_TIMEOUT,
    });
  }
}

/** The run's logged rows (one per step), as the test hooks return them. */
export async function readHistory(
  page: Page,
): Promise<{ step: number; metrics: Record<string, number> }[]> {
  return (await page.evaluate(() =>
    (globalThis as unknown as { __grpoTest: { history: () => unknown } }).__grpoTest.history(),
  )) as { step: number; metrics: Record<string, number> }[];
}
