/**
 * storageVolume (`volume/<id>`): carves out a shared volume created through
 * the storage API, then marks it available. Binding to a cluster and release
 * are the cluster workflow's business (its volume phase and its deletion).
 */
import { proxyActivities, setCurrentDetails } from '@temporalio/workflow';
import type { ClusterActivities } from '../activities/clusters';
import { CONTROL_TASK_QUEUE } from '../workers/task-queues';

const storage = proxyActivities<ClusterActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '1 hour',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

export async function storageVolume({ volumeId }: { volumeId: string }): Promise<'available' | 'gone'> {
  setCurrentDetails(`Provisioning volume ${volumeId}.`);
  const result = await storage.provisionStandaloneVolume.executeWithOptions({ summary: `provision ${volumeId}` }, [
    { volumeId },
  ]);
  setCurrentDetails(
    result === 'available' ? `Volume ${volumeId} is available.` : `Volume ${volumeId} was deleted first.`,
  );
  return result;
}
