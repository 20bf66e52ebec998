// `npm run adapter`: prints the WebGPU adapter Node sees (vendor, architecture, limits, features)
// and runs one small matmul to prove the path works end to end.
import { createStorageBuffer, readF32, uploadStorageBuffer } from '../engine/buffers';
import { createEngine } from '../engine/engine';
import { MatmulKernel } from '../kernels/matmul';

const engine = await createEngine();
console.log(JSON.stringify(engine.gpu.adapter, null, 2));
const a = uploadStorageBuffer(engine.device, new Float32Array([1, 2, 3, 4, 5, 6]));
const b = uploadStorageBuffer(engine.device, new Float32Array([7, 8, 9, 10, 11, 12]));
const c = createStorageBuffer(engine.device, 16);
const kernel = new MatmulKernel(engine.device, engine.pipelines);
await engine.run((enc) => kernel.encode(enc, { a, b, c, M: 2, N: 2, K: 3 }));
console.log(
  'matmul [[1,2,3],[4,5,6]]·[[7,8],[9,10],[11,12]] =',
  Array.from(await readF32(engine.device, c)),
);
engine.destroy();
