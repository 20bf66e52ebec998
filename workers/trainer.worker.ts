// Trainer worker: owns the GPU device. Thin comlink wrapper; the logic lives in src/.
import * as Comlink from 'comlink';
import { createTrainerApi } from '../src/app/trainer-api';

Comlink.expose(createTrainerApi());
