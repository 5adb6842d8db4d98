/** The bench's reference: a bare workflow that runs `count` no-op activities one after another. */
import { proxyActivities } from '@temporalio/workflow';

const { noop } = proxyActivities<{ noop(): Promise<void> }>({ startToCloseTimeout: '1 minute' });

export async function noopActivities(count: number): Promise<void> {
  for (let i = 0; i < count; i++) await noop();
}
