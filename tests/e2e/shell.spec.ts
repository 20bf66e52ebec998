// The app shell in real Chromium: the trainer worker finds the SwiftShader WebGPU adapter, the
// page shows it, and no request leaves the page's origin.
import { expect, test } from '@playwright/test';

test('shows the WebGPU adapter and makes no cross-origin request', async ({ page, baseURL }) => {
  const requests: string[] = [];
  page.on('request', (request) => requests.push(request.url()));
  const consoleErrors: string[] = [];
  page.on('console', (msg) => msg.type() === 'error' && consoleErrors.push(msg.text()));

  await page.goto('/');
  await expect(page.getByRole('heading', { name: 'GRPO Playground' })).toBeVisible();
  const name = page.getByTestId('adapter-name');
  await expect(name).toBeVisible({ timeout: 60_000 });
  await expect(name).toContainText(/swiftshader/i);
  await expect(page.getByText('software (CPU) emulation')).toBeVisible();
  // Key limits are listed with real values (SwiftShader grants 1 GiB storage bindings).
  await expect(page.getByRole('row', { name: /Largest storage binding/ })).toContainText('GiB');
  await expect(page.locator('.features li.has')).toContainText(['subgroups', 'timestamp-query']);

  await page.screenshot({ path: test.info().outputPath('shell.png'), fullPage: true });
  await page.screenshot({ path: 'test-results/screenshots/shell.png', fullPage: true });

  const origin = new URL(baseURL!).origin;
  expect(requests.length).toBeGreaterThan(2);
  const foreign = requests.filter(
    (url) => !url.startsWith(origin + '/') && !url.startsWith('data:') && !url.startsWith('blob:'),
  );
  expect(foreign).toEqual([]);
  expect(consoleErrors).toEqual([]);
});
