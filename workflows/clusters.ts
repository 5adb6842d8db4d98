/**
 * cluster (`cluster/<id>`): one entity workflow per GPU cluster, for its whole
 * life. It brings the cluster up phase by phase (control plane, subnet, data
 * plane, shared volume, drivers, acceptance and NCCL tests, with bounded
 * repair), then watches it: periodic health checks per node, remediations
 * (child workflows), preemption drains on durable timers, autoscaling and
 * resizes, the reservation's end. Every change is projected into PostgreSQL.
 * Changes arrive as Updates with validators; fleet notices as Signals.
 *
 * This file wires the messages and the main loop; what the cluster does lives
 * in ClusterEntity (cluster-entity.ts), and the decisions that need no
 * Temporal API in shared/cluster-state.ts.
 */
import {
  CancellationScope,
  ContinueAsNew,
  condition,
  continueAsNew,
  patched,
  defineQuery,
  defineSignal,
  defineUpdate,
  setHandler,
  workflowInfo,
  allHandlersFinished,
} from '@temporalio/workflow';
import { failureMessage } from './failures';
import { PATCHES } from './patches';
import { clusterExpiry, type ClusterUpdateRequest } from '../shared/cluster-rules';
import {
  CLUSTER_MESSAGES,
  type ClusterState,
  type ClusterWorkflowInput,
  type CreateRemediationRequest,
  type Remediation,
  type ReviewRemediationRequest,
} from '../shared/clusters';
import { ClusterEntity, DeletionRequested, type RemediationProgress } from './cluster-entity';

export const updateClusterUpdate = defineUpdate<void, [ClusterUpdateRequest]>(CLUSTER_MESSAGES.update);
export const deleteClusterUpdate = defineUpdate<void, [{ reason: string }]>(CLUSTER_MESSAGES.delete);
export const createRemediationUpdate = defineUpdate<Remediation, [CreateRemediationRequest]>(
  CLUSTER_MESSAGES.createRemediation,
);
export const reviewRemediationUpdate = defineUpdate<Remediation, [ReviewRemediationRequest]>(
  CLUSTER_MESSAGES.reviewRemediation,
);
export const preemptionNoticeSignal = defineSignal<[{ nodeId: string }]>(CLUSTER_MESSAGES.preemptionNotice);
export const remediationProgressSignal = defineSignal<[RemediationProgress]>(CLUSTER_MESSAGES.remediationProgress);
export const clusterStateQuery = defineQuery<ClusterState>('clusterState');

export async function cluster(input: ClusterWorkflowInput): Promise<'deleted'> {
  const c = new ClusterEntity(input);
  const { state, settings } = c;

  // ---- messages ----
  setHandler(clusterStateQuery, () => state);
  setHandler(updateClusterUpdate, (req) => c.update(req), { validator: (req) => c.validateUpdate(req) });
  setHandler(deleteClusterUpdate, ({ reason }) => c.requestDelete(reason));
  setHandler(createRemediationUpdate, (req) => c.createRemediation(req), {
    validator: (req) => c.validateCreateRemediation(req),
  });
  setHandler(reviewRemediationUpdate, (req) => c.reviewRemediation(req), {
    validator: (req) => c.validateReviewRemediation(req),
  });
  setHandler(preemptionNoticeSignal, ({ nodeId }) => c.onPreemptionNotice(nodeId));
  setHandler(remediationProgressSignal, (progress) => c.onRemediationProgress(progress));

  // ---- life ----
  try {
    if (!input.carried) {
      await c.project('Queued.');
      await c.bringUp();
    } else if (input.resumeBringUpTests) {
      // The previous run handed over while bring-up's tests waited for a GPU worker.
      await c.bringUpTests();
      await c.finishBringUp();
    }
    let rounds = 0;
    c.nextHealthCheck = Date.now() + settings.healthCheckIntervalSeconds * 1000;
    while (!c.deleteRequested) {
      const expiry = clusterExpiry(state.spec, c.createdAt);
      if (expiry && Date.now() >= expiry.getTime()) {
        c.deleteRequested =
          state.spec.billing_type === 'RESERVED' ? 'the reservation ended' : 'the scheduled capacity window ended';
        break;
      }
      await c.reconcile();
      if (Date.now() >= c.nextHealthCheck) {
        await c.healthChecks();
        await c.observeWorkload();
        c.nextHealthCheck = Date.now() + settings.healthCheckIntervalSeconds * 1000;
        c.scaleDeferredUntil = 0;
        continue; // act on what the round found before sleeping
      }
      rounds++;
      if ((rounds >= settings.maxRoundsPerRun || workflowInfo().continueAsNewSuggested) && c.tasks.size === 0) {
        await condition(allHandlersFinished);
        const quiet = () =>
          !c.wake && c.notices.length === 0 && c.deleteRequested === undefined && allHandlersFinished();
        if (quiet()) {
          await c.project('Continuing as new with the same state.');
          // A message that arrived while projecting stays with this run: it would be lost at the hand-over.
          if (quiet()) await continueAsNew<typeof cluster>({ ...input, carried: state });
        }
      }
      const until = Math.min(c.nextHealthCheck, expiry ? expiry.getTime() : Infinity) - Date.now();
      await condition(() => c.wake || c.deleteRequested !== undefined, Math.max(1, until));
      c.wake = false;
    }
  } catch (err) {
    if (err instanceof ContinueAsNew) throw err; // the hand-over to the next run, not a failure
    if (!(err instanceof DeletionRequested)) {
      // Anything unexpected (a bug, a cancellation from the Temporal UI): nothing is left running unowned.
      // The nodes are released and the meters closed whatever happens to this run, then the run fails.
      // (Before this patch the run failed with its nodes still held.)
      if (!patched(PATCHES.compensateOnFailure.id)) throw err;
      c.deleteRequested ??= `the cluster workflow failed: ${failureMessage(err)}`;
      await CancellationScope.nonCancellable(() => c.tearDown(c.deleteRequested!));
      throw err;
    }
  }
  await c.tearDown(c.deleteRequested!);
  await condition(allHandlersFinished);
  return 'deleted';
}
