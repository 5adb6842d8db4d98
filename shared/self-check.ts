/** Types and names shared by the self-check API, workflow and activities. */
import type { GpuType } from './gpu-types';

export const SELF_CHECK_RESOURCE_TYPE = 'system-self-check';

export function selfCheckWorkflowId(checkId: string): string {
  return `${SELF_CHECK_RESOURCE_TYPE}/${checkId}`;
}

export interface SelfCheckInput {
  checkId: string;
  projectId: string;
  gpuTypes: GpuType[];
  /** Schedule-to-start bound for each GPU probe: how long to wait for a worker on its queue. */
  queueWaitSeconds: number;
}

export type ProbeStatus = 'pending' | 'ok' | 'no_worker' | 'failed';
export type SelfCheckStatus = 'running' | 'passed' | 'failed';

/** What a worker reports about the host it runs on. */
export interface HostReport {
  hostname: string;
  pid: number;
  task_queue: string;
  /** `simulated` hosts have no physical accelerator and say so. */
  accelerator?: 'nvidia' | 'simulated' | 'none';
  gpu_type?: GpuType;
  gpus?: Array<{ index: number; name: string; memory_total_mib: number; driver_version: string }>;
  note?: string;
}

export interface ProbeRecord {
  checkId: string;
  taskQueue: string;
  status: ProbeStatus;
  host?: HostReport;
  detail?: string;
  latencyMs?: number;
}

export interface SelfCheckOutcome {
  status: Exclude<SelfCheckStatus, 'running'>;
  probes: Array<{ task_queue: string; status: ProbeStatus }>;
}
