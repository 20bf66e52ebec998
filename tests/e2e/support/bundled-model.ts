// Loading the bundled model from the Train view, as the e2e specs start most runs: the memory
// plan says it fits, Load, and the model panel says it is loaded (compiling the pipelines on
// SwiftShader takes a while).
import { expect, type Page } from '@playwright/test';

/** How long a load (or a step) may take on WebGPU emulated by SwiftShader. */
const LOAD_TIMEOUT = 180_000;

export async function loadBundledModel(page: Page): Promise<void> {
  await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
  await page.getByTestId('load-model').click();
  await expect(page.getByTestId('model-loaded')).toBeVisible({ timeout: LOAD_TIMEOUT });
}
