/**
 * cluster (`cluster/<id>`): one entity workflow per GPU cluster, for its whole
 * life. It brings the cluster up phase by phase (control plane, subnet, data
 * plane, shared volume, drivers, acceptance and NCCL tests, with bounded
 * repair), then watches it: periodic health checks per node, remediations
 * (child workflows), preemption drains on durable timers, autoscaling and
 * resizes, the reservation's end. Every change is projected into PostgreSQL.
 * Changes arrive as Updates with validators; fleet notices as Signals.
 *
 * This file wires the messages and the main loop, which only asks the entity;
 * what the cluster does lives in ClusterEntity (cluster-entity.ts) and the
 * parts it is built of, and the decisions that need no Temporal API in
 * shared/cluster-state.ts.
 */
import {
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  defineUpdate,
  patched,
  setHandler,
  allHandlersFinished,
} from '@temporalio/workflow';
import { PATCHES } from './patches';
import { compensateOnFailure, continueAsNewWhenQuiet } from './entity-kit';
import { type ClusterUpdateRequest } from '../shared/cluster-rules';
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
  const { state, handlers: h } = c;

  // ---- messages ----
  setHandler(clusterStateQuery, () => state);
  setHandler(updateClusterUpdate, (req) => h.update(req), { validator: (req) => h.validateUpdate(req) });
  setHandler(deleteClusterUpdate, ({ reason }) => h.requestDelete(reason));
  setHandler(createRemediationUpdate, (req) => h.createRemediation(req), {
    validator: (req) => h.validateCreateRemediation(req),
  });
  setHandler(reviewRemediationUpdate, (req) => h.reviewRemediation(req), {
    validator: (req) => h.validateReviewRemediation(req),
  });
  setHandler(preemptionNoticeSignal, ({ nodeId }) => h.onPreemptionNotice(nodeId));
  setHandler(remediationProgressSignal, (progress) => h.onRemediationProgress(progress));

  // ---- life ----
  const life = async () => {
    if (!input.carried) {
      await c.project('Queued.');
      await c.bringUp();
    } else if (input.resumeBringUpTests) {
      // The previous run handed over while bring-up's tests waited for a GPU worker.
      await c.resumeBringUp();
    }
    let rounds = 0;
    c.scheduleHealthCheck();
    while (!c.deleteRequested) {
      const expiry = c.expiry();
      if (c.deleteIfExpired(expiry)) break;
      await c.reconcile();
      if (c.healthCheckDue()) {
        await c.healthRound();
        continue; // act on what the round found before sleeping
      }
      rounds++;
      if (c.mayHandOver(rounds)) {
        await continueAsNewWhenQuiet(
          () => c.quiet(),
          () => c.project('Continuing as new with the same state.'),
          () => continueAsNew<typeof cluster>({ ...input, carried: state }),
        );
      }
      await c.sleep(expiry);
    }
  };
  // Anything unexpected (a bug, a cancellation from the Temporal UI): nothing is left running unowned.
  // The nodes are released and the meters closed whatever happens to this run, then the run fails.
  // (Before this patch the run failed with its nodes still held.) A delete during bring-up is no failure.
  await compensateOnFailure(
    () => patched(PATCHES.compensateOnFailure.id),
    async () => {
      try {
        await life();
      } catch (err) {
        if (!(err instanceof DeletionRequested)) throw err;
      }
    },
    async (err) => {
      await c.tearDownAfterFailure(err);
      // The run fails next: it says so, not Deleting (done) as its teardown projected.
      if (patched(PATCHES.clusterEndedStatus.id)) c.ended('Failed');
    },
  );
  await c.tearDown();
  if (patched(PATCHES.clusterEndedStatus.id)) c.ended('Deleted');
  await condition(allHandlersFinished);
  return 'deleted';
}
