/**
 * Activity stubs shared by the cluster workflows (cluster, nodeRemediation,
 * storageVolume): quick control-queue calls, and the long ones that wait on
 * the fleet (node boots, volume provisioning) and heartbeat while they do.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { ClusterActivities } from '../activities/clusters';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';

export const clusterControl = proxyActivities<ClusterActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '500 milliseconds', maximumInterval: '30 seconds' },
});

export const clusterWaits = proxyActivities<ClusterActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '1 hour',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

/** How often awaitNodes looks at the fleet while nodes boot. */
export const NODE_POLL_MS = 100;
