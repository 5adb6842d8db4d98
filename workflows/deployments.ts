/**
 * deployment (`deployment/<id>`): one entity workflow per container
 * deployment. It drives replicas to the desired count through the container
 * runtime: a replica counts once its health check answers; a replica that
 * dies is replaced after a backoff that grows with consecutive failures; a
 * spec change rolls the replicas one at a time (new one ready, then an old one
 * stopped); scale-down and delete give each replica its termination grace.
 * Replica statuses are recorded by the replica activities (replica_events);
 * the deployment's own status is projected on every change.
 *
 * This file wires the messages and the main loop; what the deployment does
 * lives in DeploymentEntity (deployment-entity.ts), and the decisions that
 * need no Temporal API in shared/deployments.ts.
 */
import {
  condition,
  defineSignal,
  defineUpdate,
  setHandler,
  allHandlersFinished,
  continueAsNew,
  patched,
  workflowInfo,
} from '@temporalio/workflow';
import { DEPLOYMENT_MESSAGES, type DeploymentSpec, type DeploymentWorkflowInput } from '../shared/deployments';
import { PATCHES } from './patches';
import { DeploymentEntity } from './deployment-entity';
import { compensateOnFailure, continueAsNewWhenQuiet } from './entity-kit';

export const updateDeploymentUpdate = defineUpdate<void, [Partial<DeploymentSpec>]>(DEPLOYMENT_MESSAGES.update);
export const deleteDeploymentUpdate = defineUpdate<void, []>(DEPLOYMENT_MESSAGES.delete);
/**
 * New replica bounds from another workflow (a rollout moving capacity between
 * deployments); workflows cannot send Updates, so this is a signal.
 */
export const setReplicaBoundsSignal = defineSignal<[{ min_replicas: number; max_replicas: number }]>(
  DEPLOYMENT_MESSAGES.setReplicaBounds,
);

export async function deployment(input: DeploymentWorkflowInput): Promise<'deleted'> {
  const d = new DeploymentEntity(input);

  // ---- messages ----
  setHandler(updateDeploymentUpdate, (patch) => d.update(patch), {
    validator: (patch: Partial<DeploymentSpec>) => d.validateUpdate(patch),
  });
  setHandler(setReplicaBoundsSignal, (bounds) => d.setReplicaBounds(bounds));
  setHandler(deleteDeploymentUpdate, () => d.requestDelete());

  // ---- life ----
  if (input.deleteOnStart === undefined) {
    // A continued run takes over the replicas the previous one was watching.
    for (const r of input.carried?.replicas ?? []) d.replicas.watch(r.replicaId, r.revision, r.hostQueue, r.image);
  } else {
    // The run that watched these has ended: stop each on its host, if the host is still there.
    await d.project(`Deleting (${input.deleteOnStart}): stopping the replicas it left.`);
    await Promise.all((input.carried?.replicas ?? []).map((r) => d.replicas.stopLeftBehind(r)));
  }

  // On an unexpected failure the replicas are stopped and Failed projected, then the run fails;
  // DELETE of a Failed deployment starts a run that removes it.
  // (Before this patch the run failed with its replicas running and metered.)
  await compensateOnFailure(
    () => patched(PATCHES.deploymentCompensateOnFailure.id),
    serve,
    (err) => d.compensate(err),
  );
  await d.tearDown();
  // The run says it ended: its last projection showed the replica count it stopped from (Scaling).
  if (patched(PATCHES.deploymentEndedStatus.id)) d.ended();
  await condition(allHandlersFinished);
  return 'deleted';

  /** The main loop: observe, reconcile, project, sleep; until deleted (or continued as new). */
  async function serve(): Promise<void> {
    let rounds = 0;
    while (!d.deleting) {
      if (++rounds > (input.maxRoundsPerRun ?? 1000) || workflowInfo().continueAsNewSuggested) {
        await continueAsNewWhenQuiet(
          () => !d.deleting,
          () => d.project('Continuing as new; the replicas are handed over.'),
          () => continueAsNew<typeof deployment>({ ...input, carried: d.carried() }),
        );
      }
      await d.autoscaler.observeIfDue();
      await d.reconcile();
      await d.project(d.roundSummary());
      await d.sleep();
    }
  }
}
