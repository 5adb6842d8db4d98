/** Control-queue activities of the system self-check: they write its read model. */
import { hostname } from 'node:os';
import type { Db } from '../db/pool';
import { completeSelfCheck, upsertProbe } from '../db/system';
import type { HostReport, ProbeRecord, SelfCheckOutcome } from '../shared/self-check';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';

export function createSystemActivities({ db }: { db: Db }) {
  return {
    async describeControlHost(): Promise<HostReport> {
      return { hostname: hostname(), pid: process.pid, task_queue: CONTROL_TASK_QUEUE, accelerator: 'none' };
    },

    async recordSelfCheckProbe(probe: ProbeRecord): Promise<void> {
      await upsertProbe(db, probe);
    },

    async completeSelfCheck({ checkId }: { checkId: string }): Promise<SelfCheckOutcome> {
      const row = await completeSelfCheck(db, checkId);
      return {
        status: row.status === 'passed' ? 'passed' : 'failed',
        probes: row.probes.map((p) => ({ task_queue: p.task_queue, status: p.status })),
      };
    },
  };
}

export type SystemActivities = ReturnType<typeof createSystemActivities>;
