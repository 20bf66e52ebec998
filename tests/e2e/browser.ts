// Where the end-to-end tests find Chromium and the flags that give it WebGPU without a GPU.
// Debian's `chromium` package ships SwiftShader, which provides WebGPU on the CPU; nothing is
// downloaded (no `npx playwright install`).
import { existsSync } from 'node:fs';

export const CHROMIUM_CANDIDATES = [
  process.env.CHROMIUM_PATH,
  '/usr/bin/chromium',
  '/usr/bin/chromium-browser',
  '/usr/bin/google-chrome',
].filter((p): p is string => !!p);

export const CHROMIUM_INSTALL_HINT =
  'End-to-end tests need a Chromium: on Debian/Ubuntu `sudo apt-get install chromium`, or set ' +
  'CHROMIUM_PATH to a Chrome/Chromium binary. To skip this layer on purpose, set SKIP_E2E=1.';

export function findChromium(): string | null {
  return CHROMIUM_CANDIDATES.find((p) => existsSync(p)) ?? null;
}

export const CHROMIUM_ARGS = [
  '--enable-unsafe-webgpu',
  // WebGPU on SwiftShader's Vulkan when the machine has no GPU.
  '--enable-features=Vulkan',
  '--use-angle=swiftshader',
  '--use-webgpu-adapter=swiftshader',
  // This machine's network is closed: background services would only hammer refused connections.
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  // Running as root (CI containers) requires it.
  ...(process.getuid?.() === 0 ? ['--no-sandbox'] : []),
];
