// Issue 33, item 6, in the built app (Chromium, WebGPU on SwiftShader): reward code in a pasted
// recipe goes through the same consent dialog as a shared link or an imported checkpoint. It used
// to run at once (step 1 reward 0.777, no dialog). Declined (Escape), the recipe does not start
// and says why; the answer is remembered for this code in the session, so a second Start does not
// ask again and does not start either.
import { expect, test } from '@playwright/test';
import { loadBundledModel } from './support/bundled-model';

test.use({ serviceWorkers: 'block', actionTimeout: 60_000 });

const CODE = 'function reward({ completion }) { return 0.777; } // <b>not markup</b>';
const RECIPE = {
  name: 'pasted-with-code',
  seed: 1,
  stages: [
    {
      kind: 'grpo',
      name: 'rl',
      options: { steps: 1, rewards: ['custom:len'], customRewards: { len: CODE } },
    },
  ],
};

test('a pasted recipe with custom reward code asks first; declined, it does not start', async ({
  page,
}) => {
  test.setTimeout(240_000);
  await page.goto('/');
  await loadBundledModel(page);
  await page.getByTestId('nav-recipes').click();
  await page.getByTestId('recipe-choice-paste').check();
  await page.getByTestId('recipe-json').fill(JSON.stringify(RECIPE));
  await expect(page.getByTestId('recipe-json-ok')).toContainText('1 stages');
  await page.getByTestId('recipe-start').click();

  const dialog = page.getByRole('dialog', { name: 'This recipe contains custom reward code' });
  await expect(dialog).toBeVisible();
  await expect(dialog.getByTestId('consent-id')).toHaveText(['custom:len']);
  expect(await dialog.getByTestId('consent-code').evaluate((el) => el.textContent)).toBe(CODE);
  await expect(dialog).toContainText('the recipe does not start');
  await page.keyboard.press('Escape');
  await expect(dialog).toHaveCount(0);

  const error = page.getByTestId('recipe-error');
  await expect(error).toContainText(
    "The recipe 'pasted-with-code' did not start: its custom reward code was not allowed to run.",
  );
  await expect(page.getByTestId('recipe-row')).toHaveCount(0);

  // Remembered for the session: Start again asks nothing and still starts nothing.
  await error.getByRole('button', { name: 'Dismiss' }).click();
  await page.getByTestId('recipe-start').click();
  await expect(error).toContainText('did not start');
  await expect(page.getByRole('dialog')).toHaveCount(0);
  await expect(page.getByTestId('recipe-row')).toHaveCount(0);
});
