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
  /**
   * Short tasks (node tests, probes, self-checks) the host's worker runs at once beside its
   * trainings. It is also how many tasks beyond its training slots the worker takes, so a host with
   * few leaves trainings it cannot start queued for other hosts.
   */
  readonly checkSlots: number;
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
  readonly checkSlots = 4;
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
  /**
   * It stands for every node of the simulated fleet, whose tests would run on separate machines:
   * 4 at a time made 50 clusters' 400 node tests wait on one another (the cluster bench, 8 rounds
   * each: 1.224 times the bare workflows' time with 4, 1.112 with 64). In the one-machine setups
   * the simulated host is the only GPU host, so the trainings it takes beyond its slots had nowhere
   * else to go.
   */
  readonly checkSlots = 64;
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
