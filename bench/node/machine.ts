// What machine a Node benchmark ran on: CPU model and cores, memory, load (the machine is shared,
// so the load average is part of the result), Node and OS versions.
import { cpus, loadavg, platform, release, totalmem } from 'node:os';

export interface MachineInfo {
  cpu: string;
  cores: number;
  memoryGiB: number;
  /** 1-minute load average when the benchmark started: other work competing for the cores. */
  loadAverage1m: number;
  os: string;
  node: string;
}

export function machineInfo(): MachineInfo {
  const list = cpus();
  return {
    cpu: list[0]?.model.trim() ?? 'unknown',
    cores: list.length,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    loadAverage1m: Math.round(loadavg()[0] * 100) / 100,
    os: `${platform()} ${release()}`,
    node: process.version,
  };
}
