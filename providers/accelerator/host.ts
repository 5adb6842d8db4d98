/**
 * What a GPU worker's host has. On hosts with NVIDIA GPUs the answer comes
 * from nvidia-smi; elsewhere (a laptop, CI, this repo's default) the worker
 * runs as a *simulated* accelerator host and says so in every report: it has
 * no GPU, it only lets gpu.<type> task queues be served on one machine.
 */
import { execFile } from 'node:child_process';
import { hostname } from 'node:os';
import { promisify } from 'node:util';
import type { GpuType } from '../../shared/gpu-types';
import type { HostReport } from '../../shared/self-check';

const run = promisify(execFile);

export interface AcceleratorHost {
  readonly kind: 'nvidia' | 'simulated';
  describe(gpuType: GpuType, taskQueue: string): Promise<HostReport>;
}

async function queryNvidiaSmi(): Promise<NonNullable<HostReport['gpus']>> {
  const { stdout } = await run(
    'nvidia-smi',
    ['--query-gpu=index,name,memory.total,driver_version', '--format=csv,noheader,nounits'],
    { timeout: 15_000 },
  );
  return stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [index, name, mem, driver] = line.split(',').map((s) => s.trim());
      return { index: Number(index), name, memory_total_mib: Number(mem), driver_version: driver };
    });
}

export class NvidiaHost implements AcceleratorHost {
  readonly kind = 'nvidia' as const;
  async describe(gpuType: GpuType, taskQueue: string): Promise<HostReport> {
    return {
      hostname: hostname(),
      pid: process.pid,
      task_queue: taskQueue,
      accelerator: 'nvidia',
      gpu_type: gpuType,
      gpus: await queryNvidiaSmi(),
    };
  }
}

export class SimulatedHost implements AcceleratorHost {
  readonly kind = 'simulated' as const;
  async describe(gpuType: GpuType, taskQueue: string): Promise<HostReport> {
    return {
      hostname: `${hostname()} (simulated accelerator host)`,
      pid: process.pid,
      task_queue: taskQueue,
      accelerator: 'simulated',
      gpu_type: gpuType,
      gpus: [],
      note: `Simulated ${gpuType} host: no physical GPU is present; this worker serves ${taskQueue} for local development and tests.`,
    };
  }
}

export async function detectAcceleratorHost(mode: 'auto' | 'nvidia' | 'simulated'): Promise<AcceleratorHost> {
  if (mode === 'simulated') return new SimulatedHost();
  try {
    await queryNvidiaSmi();
    return new NvidiaHost();
  } catch (err) {
    if (mode === 'nvidia') {
      throw new Error(`GANTRY_ACCELERATOR=nvidia but nvidia-smi failed: ${(err as Error).message}`);
    }
    return new SimulatedHost();
  }
}
