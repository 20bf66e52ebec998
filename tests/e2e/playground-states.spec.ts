// The playground UI's special states in Debian Chromium against the built app (vite preview):
// - no WebGPU (a second Chromium started without the WebGPU flags: navigator.gpu is there but no
//   adapter): the page says so and how to get WebGPU, and the CPU fallback loads the bundled model in
//   its worker, samples real completions for the task's prompts and scores them with the built-in
//   rewards (checked here against the reward code), and chats; model output shows as text;
// - device loss: with the storage quota nearly full (Storage.overrideQuotaForOrigin), train a step
//   (its metrics fit) so the save of its checkpoint fails with the "storage full" message, save for
//   real, lose the GPU device through the test hook (?test-hooks=1), see the banner, resume from the
//   checkpoint on a new device, train on;
// - drag and drop: the bundled model's real files dropped on the model panel (a scripted
//   DataTransfer) show the drop state, preview and load like the file inputs; picked as a directory
//   they are named after the folder; a step of 2-token completions earns no reward, and the Train
//   view's no-signal note says so;
// - a model URL of another https origin (a Hugging Face /resolve/ URL, answered here by page.route)
//   is not blocked by the production CSP (sent with the worker scripts as nginx does), an http one of
//   another origin is, and a model too large for the device says so before anything is loaded.
// Shapes are tiny: SwiftShader runs WebGPU on the CPU. Screenshots go to test-results/screenshots/.
import { chromium, expect, test, type Page, type Route } from '@playwright/test';
import { mkdirSync, readFileSync } from 'node:fs';
import { extractAnswer, formatOk } from '../../src/rewards/rewards';
import { verifyCountdown } from '../../src/tasks/verify';
import { CHROMIUM_ARGS, findChromium } from './browser';
import { loadBundledModel } from './support/bundled-model';

const SHOTS = 'test-results/screenshots';
const STEP_TIMEOUT = 180_000;
const MODEL_DIR = 'public/models/tiny-reasoner';
/** A run small enough for SwiftShader: 1 prompt × 2 completions of ≤ 8 tokens. */
const TINY_RUN = 'perStepPrompts=1&numGenerations=2&maxCompletionLength=8&evalPrompts=1';

// No service worker: page.route must see every request, and the quota test wants the precache's
// ~30 MB out of the origin's usage.
test.use({ serviceWorkers: 'block' });
test.describe.configure({ mode: 'serial' });

async function shoot(page: Page, name: string) {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });
}

/** Requests that left the page's origin (data: and blob: are local). */
function watchForeign(page: Page, origin: string): string[] {
  const foreign: string[] = [];
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(origin + '/') && !u.startsWith('data:') && !u.startsWith('blob:'))
      foreign.push(u);
  });
  return foreign;
}

test('no WebGPU: the page says so, and the bundled model samples and chats on the CPU', async ({
  baseURL,
}) => {
  test.setTimeout(240_000);
  // The same Chromium without --enable-unsafe-webgpu and the SwiftShader adapter flags.
  const webgpuFlags = /webgpu|Vulkan|use-angle/i;
  const browser = await chromium.launch({
    executablePath: findChromium()!,
    args: CHROMIUM_ARGS.filter((a) => !webgpuFlags.test(a)),
  });
  try {
    const context = await browser.newContext({ baseURL, serviceWorkers: 'block' });
    const page = await context.newPage();
    const origin = new URL(baseURL!).origin;
    const foreign = watchForeign(page, origin);
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    const workers: string[] = [];
    page.on('worker', (w) => workers.push(w.url()));

    await page.goto('/#train');
    const banner = page.getByTestId('no-webgpu-banner');
    await expect(banner).toBeVisible({ timeout: 60_000 });
    await expect(banner).toContainText('cannot train');
    await expect(banner).toContainText('no GPU adapter was found');
    await expect(banner).toContainText('enable-unsafe-webgpu');
    await expect(banner).toContainText('Training runs only on WebGPU');
    await expect(page.getByTestId('load-model')).toBeDisabled();
    // The test hooks exist only with ?test-hooks=1.
    expect(await page.evaluate(() => '__grpoTest' in window)).toBe(false);

    const panel = page.getByTestId('cpu-fallback');
    await expect(panel).toBeVisible();
    await page.getByTestId('cpu-load').click();
    await expect(page.getByTestId('cpu-loaded')).toBeVisible({ timeout: 60_000 });
    expect(workers.some((u) => /cpu\.worker/.test(u))).toBe(true);

    await page.getByTestId('cpu-prompts').fill('2');
    await page.getByTestId('cpu-samples').fill('2');
    await page.getByTestId('cpu-sample').click();
    const completions = page.getByTestId('cpu-completion');
    await expect(completions).toHaveCount(4, { timeout: 60_000 });
    await expect(page.getByTestId('cpu-summary')).toContainText('2 prompts × 2 completions');

    // Every reward shown is what the built-in reward code gives the text shown.
    const groups = await page.getByTestId('cpu-group').evaluateAll((els) =>
      els.map((g) => ({
        question: g.querySelector('strong')?.textContent ?? '',
        completions: [...g.querySelectorAll('[data-testid="cpu-completion"]')].map((c) => ({
          text: c.querySelector('[data-testid="cpu-text"]')?.textContent ?? '',
          total: Number(c.getAttribute('data-total')),
          format: Number(c.getAttribute('data-format')),
          accuracy: Number(c.getAttribute('data-accuracy')),
        })),
      })),
    );
    expect(groups).toHaveLength(2);
    let formatted = 0;
    for (const g of groups) {
      const m = /\[([\d, ]+)\].*equals (\d+)/.exec(g.question);
      expect(m, g.question).not.toBeNull();
      const nums = m![1].split(',').map(Number);
      for (const c of g.completions) {
        expect(c.text.length).toBeGreaterThan(0);
        const format = formatOk(c.text) ? 1 : 0;
        const answer = extractAnswer(c.text);
        const accuracy = answer !== null && verifyCountdown(answer, nums, Number(m![2])).ok ? 1 : 0;
        expect(c.format).toBe(format);
        expect(c.accuracy).toBe(accuracy);
        expect(c.total).toBe(format + accuracy);
        formatted += format;
      }
    }
    // The bundled model writes the format nearly always (99.6% at temperature 1).
    expect(formatted).toBeGreaterThanOrEqual(2);
    const texts = groups.flatMap((g) => g.completions.map((c) => c.text)).join('\n');
    console.log(`CPU fallback sampled:\n${texts}`);

    // Chat, greedy: the reply's tags are text, never elements.
    await page.getByTestId('cpu-temperature').fill('0');
    await page
      .locator('#cpu-chat-in')
      .fill('Using the numbers [3, 5, 7], create an equation that equals 15');
    await page.getByTestId('cpu-send').click();
    const log = page.getByTestId('cpu-chat-log');
    await expect(log).toContainText('<answer>', { timeout: 60_000 });
    expect(await log.locator('think, answer').count()).toBe(0);
    await shoot(page, 'no-webgpu-cpu-fallback');

    expect(foreign).toEqual([]);
    expect(pageErrors).toEqual([]);
  } finally {
    await browser.close();
  }
});

test('no navigator.gpu at all: the same state, with its own reason', async ({ page }) => {
  // An init script reaches the page, not the trainer worker that asks for WebGPU: the worker's
  // script is served with navigator.gpu taken away before its module body runs.
  await page.route(/\/assets\/trainer\.worker-[\w-]+\.js$/, async (route: Route) => {
    const response = await route.fetch();
    const body =
      "Object.defineProperty(WorkerNavigator.prototype, 'gpu', { get: () => undefined });\n" +
      (await response.text());
    await route.fulfill({ response, body });
  });
  await page.goto('/#train');
  const banner = page.getByTestId('no-webgpu-banner');
  await expect(banner).toBeVisible({ timeout: 60_000 });
  await expect(banner).toContainText('navigator.gpu is missing');
  await expect(page.getByTestId('no-webgpu')).toContainText('navigator.gpu is missing');
  await expect(page.getByTestId('cpu-load')).toBeVisible();
});

test('device loss: storage full, save, lose the device, resume from the checkpoint, train on; a GPU error likewise', async ({
  page,
  baseURL,
}) => {
  test.setTimeout(600_000);
  const origin = new URL(baseURL!).origin;
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  // Storage nearly full from the start: the origin's quota (Storage.overrideQuotaForOrigin) has
  // room for the run's metrics, which are stored at every step, but not for one ~6 MiB checkpoint.
  // Capped before the first write, not after it: Chromium's IndexedDB caches the space a write was
  // granted for up to 30 s (BucketContext::kBucketSpaceCacheTimeLimit), so a cap set just after the
  // step's metrics were stored is not seen by a save that follows at once.
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Storage.overrideQuotaForOrigin', { origin, quotaSize: 2 * 1024 * 1024 });
  await page.goto(`/?test-hooks=1&${TINY_RUN}#train`);
  await expect(page.getByTestId('adapter-name')).toBeVisible({ timeout: 60_000 });
  await expect(page.getByTestId('banner')).toHaveCount(0);
  await loadBundledModel(page);

  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 1', { timeout: STEP_TIMEOUT });

  // Storage full: the checkpoint does not fit (a real QuotaExceededError).
  await expect(page.getByTestId('unsaved')).toContainText('1 unsaved step');
  await page.getByTestId('save').click();
  const full = page.getByTestId('banner').filter({ hasText: 'Storage full' });
  await expect(full).toBeVisible({ timeout: 60_000 });
  await expect(full).toContainText('the checkpoint at step 1 was not saved');
  await expect(full).toContainText("the browser's storage quota is exhausted");
  await expect(full.getByTestId('storage-full-help')).toContainText('To free space');
  // The run is named by its name, not its id; one message for one failure.
  await expect(full).not.toContainText(/'[0-9a-f]{8}-[0-9a-f]{4}-/);
  await expect(page.getByTestId('banner')).toHaveCount(1);
  await shoot(page, 'storage-full');
  await full.getByRole('button', { name: 'Dismiss' }).click();
  await cdp.send('Storage.overrideQuotaForOrigin', { origin });

  await page.getByTestId('save').click();
  await expect(page.getByTestId('last-saved')).toContainText('step 1', { timeout: 60_000 });
  // A second step that is not saved: resuming goes back to the checkpoint's step.
  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 2', { timeout: STEP_TIMEOUT });
  await expect(page.getByTestId('chart-reward')).toHaveAttribute('data-points', '2');

  await page.evaluate(() =>
    (window as unknown as { __grpoTest: { loseDevice(): Promise<void> } }).__grpoTest.loseDevice(),
  );
  const lost = page.getByTestId('device-lost');
  await expect(lost).toBeVisible({ timeout: 30_000 });
  await expect(lost).toContainText('The GPU device was lost');
  await expect(lost).toContainText('destroyed');
  await expect(lost).toContainText('the step after it was not saved');
  await expect(page.getByTestId('status')).toContainText('lost');
  await expect(page.getByTestId('step')).toBeDisabled();
  await shoot(page, 'device-lost');

  await lost.getByRole('button', { name: 'Resume from the checkpoint at step 1' }).click();
  await expect(lost).toHaveCount(0, { timeout: STEP_TIMEOUT });
  await expect(page.getByTestId('step-counter')).toContainText('step 1');
  await expect(page.getByTestId('chart-reward')).toHaveAttribute('data-points', '1');
  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 2', { timeout: STEP_TIMEOUT });
  await expect(page.getByTestId('chart-reward')).toHaveAttribute('data-points', '2');
  await expect(page.getByTestId('banner')).toHaveCount(0);

  // A GPU error nobody captured (an engine bug's invalid command) ends the device the same way,
  // said as what it is, instead of training on with the work the GPU dropped.
  await page.evaluate(() =>
    (
      window as unknown as { __grpoTest: { raiseGpuError(): Promise<void> } }
    ).__grpoTest.raiseGpuError(),
  );
  await expect(lost).toBeVisible({ timeout: 30_000 });
  await expect(lost).toContainText('The GPU reported an error');
  await expect(lost).toContainText('validation: Source and destination are the same buffer');
  await expect(lost).toContainText('This is a bug in GRPO Playground');
  await expect(lost).not.toContainText('The GPU device was lost');
  await expect(page.getByTestId('status')).toContainText('lost');
  await lost.getByRole('button', { name: 'Resume from the checkpoint at step 1' }).click();
  await expect(lost).toHaveCount(0, { timeout: STEP_TIMEOUT });
  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 2', { timeout: STEP_TIMEOUT });
  await expect(page.getByTestId('banner')).toHaveCount(0);
  expect(pageErrors).toEqual([]);
});

test('drag and drop: the bundled model files dropped on the model panel preview and load', async ({
  page,
}) => {
  test.setTimeout(300_000);
  await page.goto(`/?${TINY_RUN}#train`);
  await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
  const panel = page.getByTestId('model-panel');

  // The real bytes of the bundled model, in a DataTransfer the way a drop from the desktop has them.
  const names = ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json'];
  const files = names.map((name) => ({
    name,
    bytes: [...readFileSync(`${MODEL_DIR}/${name}`)],
  }));
  const dataTransfer = await page.evaluateHandle((list) => {
    const dt = new DataTransfer();
    for (const f of list) dt.items.add(new File([new Uint8Array(f.bytes)], f.name));
    return dt;
  }, files);

  await panel.dispatchEvent('dragenter', { dataTransfer });
  await panel.dispatchEvent('dragover', { dataTransfer });
  await expect(page.getByTestId('drop-overlay')).toBeVisible();
  await expect(panel).toHaveClass(/dropping/);
  await shoot(page, 'model-drop-target');
  await panel.dispatchEvent('drop', { dataTransfer });
  await expect(page.getByTestId('drop-overlay')).toHaveCount(0);

  const preview = page.getByTestId('model-preview');
  await expect(preview).toContainText('4 dropped files', { timeout: 60_000 });
  await expect(preview).toContainText('4 layers');
  await expect(page.getByTestId('memory-plan')).toContainText('fits');
  await page.getByTestId('load-model').click();
  const loaded = page.getByTestId('model-loaded');
  // Loose files, no folder and no _name_or_path in config.json: the model is called what it is.
  await expect(loaded).toContainText('LlamaForCausalLM (', { timeout: STEP_TIMEOUT });
  await expect(loaded).not.toContainText('dropped files');
  await shoot(page, 'model-dropped');

  // Picked as a directory, the same files are called after their folder (webkitRelativePath's
  // first segment), and the button loads them rather than "reloads" a model not loaded yet.
  await page.locator('input[type="file"][webkitdirectory]').setInputFiles(MODEL_DIR);
  await expect(page.getByTestId('model-name')).toHaveText('tiny-reasoner', { timeout: 60_000 });
  await expect(page.getByTestId('model-source')).toContainText('folder tiny-reasoner (');
  await expect(page.getByTestId('load-model')).toHaveText('Load model');
  await page.getByTestId('load-model').click();
  await expect(loaded).toContainText('tiny-reasoner', { timeout: STEP_TIMEOUT });
  await expect(page.getByTestId('load-model')).toHaveText('Reload model');

  // A run whose rewards are all 0 (2-token completions hold no <think>…<answer>): from its first
  // step the Train view says so beside the charts, with the causes the numbers point at (the 3-step
  // "stuck" form is unit-tested on metric rows: tests/unit/no-signal.test.ts).
  const budget = page.locator('#opt-maxCompletionLength');
  await budget.evaluate((el) => {
    const details = el.closest('details');
    if (details) details.open = true;
  });
  await budget.fill('2');
  const note = page.getByTestId('no-signal');
  await expect(note).toHaveCount(0);
  await page.getByTestId('step').click();
  await expect(page.getByTestId('step-counter')).toContainText('step 1', {
    timeout: STEP_TIMEOUT,
  });
  // After a single Step the run is ready for the next one, not "Paused".
  await expect(page.getByTestId('status')).toHaveText('Ready', { timeout: STEP_TIMEOUT });
  await expect(note).toBeVisible();
  await expect(note).toHaveAttribute('role', 'status');
  await expect(note).toHaveAttribute('data-kind', 'tie');
  await expect(note).toContainText('No signal at step 1');
  await expect(note).toContainText('100% of the completions were cut at 2 tokens');
  await expect(note).toContainText('The format reward never fires');
  await expect(note).toContainText('out of the model’s reach');
  // The stored run is named after the folder too (task · model · options).
  await page.getByTestId('nav-checkpoints').click();
  await expect(page.getByTestId('run-name').first()).toContainText('countdown · tiny-reasoner ·');
  await page.getByTestId('nav-train').click();

  // The keyboard route is still there: the source radios and the choose buttons.
  await page.getByRole('radio', { name: 'Local folder' }).focus();
  await expect(page.getByRole('button', { name: 'Choose folder…' })).toBeVisible();
  await expect(page.getByRole('button', { name: 'Choose files…' })).toBeVisible();
  await expect(page.getByTestId('drop-zone')).toBeVisible();
});

test('model URL of another origin: https passes the CSP, http does not; too large is explained', async ({
  page,
  baseURL,
}) => {
  test.setTimeout(180_000);
  const origin = new URL(baseURL!).origin;
  // The production policy (deploy/nginx) on the worker scripts, as nginx sends it: a worker's CSP
  // comes from its own response, and the preview server sends none.
  const csp = /add_header Content-Security-Policy "([^"]+)"/.exec(
    readFileSync('deploy/nginx/grpo-headers.conf', 'utf8'),
  )![1];
  await page.route(/\/assets\/[\w.-]+\.worker-[\w-]+\.js$/, async (route: Route) => {
    const response = await route.fetch();
    await route.fulfill({
      response,
      headers: { ...response.headers(), 'content-security-policy': csp },
    });
  });
  const hub = 'https://huggingface.co/acme';
  const served: string[] = [];
  const huge = {
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    hidden_size: 4096,
    intermediate_size: 14336,
    num_hidden_layers: 32,
    num_attention_heads: 32,
    num_key_value_heads: 8,
    vocab_size: 128256,
    max_position_embeddings: 8192,
    rope_theta: 500000,
    rms_norm_eps: 1e-5,
    tie_word_embeddings: false,
  };
  const serve = async (route: Route) => {
    const url = new URL(route.request().url());
    served.push(url.href);
    const [, model, file] = /^\/acme\/([^/]+)\/resolve\/main\/(.+)$/.exec(url.pathname) ?? [];
    const headers = { 'access-control-allow-origin': '*' };
    if (model === 'huge-llama' && file === 'config.json')
      return route.fulfill({ status: 200, json: huge, headers });
    if (model === 'tiny-reasoner' && file) {
      try {
        return await route.fulfill({
          status: 200,
          body: readFileSync(`${MODEL_DIR}/${file}`),
          headers,
        });
      } catch {
        // falls through to 404
      }
    }
    return route.fulfill({ status: 404, body: 'Entry not found', headers });
  };
  await page.route(`${hub}/**`, serve);
  await page.route('http://models.example/**', serve);

  const foreign = watchForeign(page, origin);
  await page.goto('/#train');
  await expect(page.getByTestId('memory-plan')).toContainText('fits', { timeout: 60_000 });
  // Nothing of another origin is requested until the user asks for it.
  expect(foreign).toEqual([]);

  await page.getByRole('radio', { name: 'URL' }).check();
  const urlField = page.locator('#model-url');
  const check = page.getByRole('button', { name: 'Check', exact: true });
  await urlField.fill(`${hub}/huge-llama/resolve/main/`);
  await check.click();
  const plan = page.getByTestId('memory-plan');
  await expect(plan).toContainText('too large', { timeout: 60_000 });
  const tooLarge = page.getByTestId('too-large');
  await expect(tooLarge).toBeVisible();
  await expect(tooLarge).toContainText('Too large for this GPU.');
  await expect(tooLarge).toContainText('Does not fit');
  const message = (await tooLarge.textContent()) ?? '';
  console.log(`too large: ${message}`);
  expect(message.length).toBeGreaterThan(20);
  await expect(page.getByTestId('load-model')).toBeDisabled();
  await shoot(page, 'model-too-large');

  await urlField.fill(`${hub}/tiny-reasoner/resolve/main/`);
  await check.click();
  await expect(plan).toContainText('fits', { timeout: 60_000 });
  await expect(page.getByTestId('model-preview')).toContainText(
    `${hub}/tiny-reasoner/resolve/main/`,
  );
  expect(served).toContain(`${hub}/tiny-reasoner/resolve/main/config.json`);

  // Plain http of another origin stays blocked by connect-src (the route never sees it).
  await urlField.fill('http://models.example/acme/tiny-reasoner/resolve/main/');
  await check.click();
  await expect(page.getByRole('alert').filter({ hasText: 'could not fetch' })).toBeVisible({
    timeout: 60_000,
  });
  expect(served.some((u) => u.startsWith('http://models.example/'))).toBe(false);
});

test('the Aha view puts the aha preset (what `npm run aha` runs) in the options', async ({
  page,
}) => {
  await page.goto('/#aha');
  await page.getByTestId('use-aha-preset').click();
  await expect(page.getByText("The 'aha' preset is in the options")).toBeVisible();
  await page.getByTestId('nav-train').click();
  // PRESETS.aha: 2 prompts × 16 completions, completions ≤ 80 tokens, prompts ≤ 32 tokens.
  await expect(page.getByLabel('num generations', { exact: true })).toHaveValue('16');
  await expect(page.getByLabel('per step prompts', { exact: true })).toHaveValue('2');
  await expect(page.getByLabel('max prompt length', { exact: true })).toHaveValue('32');
});
