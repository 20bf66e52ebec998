// The GPU path's matmul (avoidBarriers: false) at the bundled tiny-reasoner's and Qwen2.5-0.5B's
// shapes, per variant: 'staged64' (the staged 64×64 kernel every real GPU ran before issue 34)
// beside the GPU variants (src/kernels/matmul.ts MATMUL_VARIANTS), GFLOP/s from timeMatmul
// (src/kernels/matmul-sweep.ts). On SwiftShader these are CPU figures, a proxy only: they say
// which variant does less work per output on a CPU, not what a GPU will do.
// Run (bundled like the CLI, so WGSL loads through import.meta.glob):
//   npx vite build --ssr bench/kernels/matmul-gpu-path.ts --outDir node_modules/.cache/mm-bench --emptyOutDir \
//     && VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node node_modules/.cache/mm-bench/matmul-gpu-path.js
// Flags: --runs N (default 3), --only tiny|qwen, --variants a,b,…
import { createEngine } from '../../src/engine/engine';
import { MATMUL_VARIANTS, type MatmulVariant } from '../../src/kernels/matmul';
import { timeMatmul, type SweepShape } from '../../src/kernels/matmul-sweep';

const arg = (name: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const runs = Number(arg('--runs') ?? 3);
const only = arg('--only');
const variants = (arg('--variants')?.split(',') ?? [
  'staged64',
  'reg128x64',
  'reg64x64',
  'reg16x64',
  'splitk16x64',
]) as MatmulVariant[];
for (const v of variants) if (!(v in MATMUL_VARIANTS)) throw new Error(`unknown variant ${v}`);

// y = x·Wᵀ products: (name, M, N, K). Qwen's LM head (N = 151,936) is left out: minutes per run
// on 2 emulated cores; its decode shape is the same kernel as 'up' with more columns.
const SETS: Record<string, SweepShape[]> = {
  tiny: [
    { name: 'tiny up M=8', M: 8, N: 224, K: 80, transB: true },
    { name: 'tiny head M=8', M: 8, N: 449, K: 80, transB: true },
    { name: 'tiny up M=256', M: 256, N: 224, K: 80, transB: true },
    { name: 'tiny down M=256', M: 256, N: 80, K: 224, transB: true },
  ],
  qwen: [
    { name: 'qwen q/o M=8', M: 8, N: 896, K: 896, transB: true },
    { name: 'qwen up M=8', M: 8, N: 4864, K: 896, transB: true },
    { name: 'qwen q/o M=64', M: 64, N: 896, K: 896, transB: true },
    { name: 'qwen down M=64', M: 64, N: 896, K: 4864, transB: true },
  ],
};

const engine = await createEngine({ tuning: { avoidBarriers: false } });
const { adapter } = engine.gpu;
console.log(`adapter: ${adapter.vendor} ${adapter.architecture} ${adapter.description}`);
console.log(`runs: ${runs}; GFLOP/s median (min–max)`);
for (const [set, shapes] of Object.entries(SETS)) {
  if (only && only !== set) continue;
  for (const shape of shapes) {
    const cells: string[] = [];
    for (const variant of variants) {
      const t = await timeMatmul(
        engine,
        shape,
        { matmulSmall: variant, matmulLarge: variant },
        runs,
      );
      const g = t.gflops;
      cells.push(
        `${variant}${t.splits > 1 ? `(${t.splits} splits)` : ''} ${g.median.toFixed(3)} ` +
          `(${g.min.toFixed(3)}–${g.max.toFixed(3)}) [${t.method}]`,
      );
    }
    console.log(`${shape.name.padEnd(18)} ${cells.join(' | ')}`);
  }
}
engine.destroy();
