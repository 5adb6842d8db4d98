/**
 * meterUsage: one pass of the usage meter. The `usage-metering` schedule
 * (api/usage-schedule.ts) runs it every GANTRY_USAGE_METER_SECONDS, so
 * resources that keep running (clusters, replicas) appear in usage reports
 * as they accrue, not only when they stop.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { UsageActivities } from '../activities/usage';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';

const usage = proxyActivities<UsageActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', maximumAttempts: 10 },
});

/** Returns how many open intervals were metered. */
export async function meterUsage(): Promise<number> {
  return usage.meterOpenUsage();
}
