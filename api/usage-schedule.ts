/**
 * The `usage-metering` Temporal schedule: runs the meterUsage workflow every
 * GANTRY_USAGE_METER_SECONDS on the control queue. Made (or brought to the
 * configured interval) when the API starts; operators see its runs in the
 * Temporal UI under Schedules.
 */
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import type { Logger } from '../platform/logger';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';
import { meterUsage } from '../workflows/usage';

export const USAGE_METERING_SCHEDULE_ID = 'usage-metering';

export async function ensureUsageMeteringSchedule(temporal: Client, everySeconds: number, logger: Logger) {
  const action = {
    type: 'startWorkflow' as const,
    workflowType: meterUsage,
    workflowId: 'usage-metering',
    taskQueue: CONTROL_TASK_QUEUE,
    args: [] as [],
  };
  const spec = { intervals: [{ every: `${everySeconds} seconds` as const }] };
  // A pass still running when the next is due is not doubled: the next one covers both.
  const policies = { overlap: ScheduleOverlapPolicy.SKIP };
  try {
    await temporal.schedule.create({ scheduleId: USAGE_METERING_SCHEDULE_ID, spec, action, policies });
    logger.info({ scheduleId: USAGE_METERING_SCHEDULE_ID, everySeconds }, 'usage-metering schedule created');
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    await temporal.schedule
      .getHandle(USAGE_METERING_SCHEDULE_ID)
      .update((previous) => ({ ...previous, spec, action, policies }));
  }
}
