// The app shell in real Chromium: the trainer worker finds the SwiftShader WebGPU adapter, the
// page shows it, and no request leaves the page's origin. The Trainer options form says which
// values are unusual (accepted with a warning, as the command line prints it). A panel's help link
// opens its section of the guide (served with the app) in a new tab.
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

test('a section link of a long-form view lands its heading below the sticky header', async ({
  page,
}) => {
  await page.goto('/');
  await page.getByTestId('nav-paper').click();
  await page
    .getByRole('navigation', { name: 'Paper sections' })
    .getByRole('link', { name: 'rewards' })
    .click();
  const heading = page.getByRole('heading', { name: '2. Rule rewards' });
  await expect(heading).toBeInViewport();
  // The anchor scroll is instant; measure once it has settled.
  await expect
    .poll(() => page.evaluate(() => window.scrollY), { timeout: 5_000 })
    .toBeGreaterThan(100);
  // The app's sticky header comes first in the document, before the views' own headers.
  const headerBottom = await page
    .locator('header')
    .first()
    .evaluate((el) => el.getBoundingClientRect().bottom);
  const headingTop = await heading.evaluate((el) => el.getBoundingClientRect().top);
  expect(headerBottom).toBeGreaterThan(30);
  expect(headingTop).toBeGreaterThanOrEqual(headerBottom);
});

test('links from The paper in brief into Learn open the Learn view', async ({ page }) => {
  await page.goto('/');
  await page.getByTestId('nav-paper').click();
  await page.locator('#paper-ppo').getByRole('link', { name: 'KL' }).click();
  await expect(page).toHaveURL(/#learn\/kl$/);
  await expect(page.getByTestId('nav-learn')).toHaveAttribute('aria-current', 'page');
  // No step has run, so Learn says what it needs instead of its sections.
  await expect(page.getByText('Learn mode explains GRPO on the live model')).toBeVisible();
});

test('an unusual option value is accepted with a warning under its field', async ({ page }) => {
  // From a shared link: max_grad_norm 0 turns clipping off; its group is folded, and says so.
  await page.goto('/?maxGradNorm=0#train');
  const optimizer = page.locator('summary', { hasText: 'Optimizer' });
  await expect(optimizer.getByTestId('options-warning-count')).toHaveText('· 1 unusual value');
  await optimizer.click();
  await expect(page.locator('#opt-maxGradNorm')).toHaveAccessibleDescription(
    /max grad norm 0 is outside the usual range \(> 0\): gradient clipping is off/,
  );
  // Typed into the form: the line appears under the field, and goes when the value is usual.
  const temperature = page.locator('#opt-temperature');
  await temperature.fill('3');
  await expect(page.locator('#opt-temperature-warning')).toHaveText(
    /temperature 3 is outside the usual range \(≤ 2\)/,
  );
  await temperature.fill('1');
  await expect(page.locator('#opt-temperature-warning')).toHaveCount(0);
  await expect(temperature).not.toHaveAttribute('aria-describedby');
});

test("a panel's help link opens its section of the guide in a new tab", async ({ page }) => {
  await page.goto('/#train');
  const link = page.getByTestId('help-model');
  await expect(link).toHaveAttribute('target', '_blank');
  const [guide] = await Promise.all([page.waitForEvent('popup'), link.click()]);
  await expect(guide).toHaveURL(/\/guide\/models\.html#load-a-model$/);
  await expect(guide.locator('h2#load-a-model')).toBeInViewport();
});
