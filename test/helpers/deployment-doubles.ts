/**
 * Activity doubles for the deployment workflow in the workflow test tier,
 * behind the real signatures (DeploymentControlActivities and
 * ReplicaActivities): replicas are entries in a set, supervised until the
 * workflow cancels them; projections and metric reads are recorded; faults are
 * programmed per activity.
 */
import { ApplicationFailure } from '@temporalio/common';
import { Context, heartbeat } from '@temporalio/activity';
import type { DeploymentControlActivities, ReplicaActivities } from '../../activities/deployments';
import type { ReplicaRecord } from '../../db/deployments';
import {
  CONTAINERS_TASK_QUEUE,
  HOST_RESTARTING,
  type DeploymentState,
  type DeploymentWorkflowInput,
} from '../../shared/deployments';

type Activities = DeploymentControlActivities & ReplicaActivities;

export class DeploymentActivityDoubles {
  /** Replicas launched and not stopped. */
  readonly running = new Set<string>();
  readonly projections: Array<{ state: DeploymentState; version: number; generation?: number }> = [];
  /** What scrapeReplicaMetric reports; an Error makes it fail (non-retryably, as a dead endpoint would). */
  metric: number | Error = 0;
  /** What httpMeanRequestMs reports: the gateway's mean answer time, null when nothing was answered. */
  meanRequestMs: number | null = null;
  /** What the workflow recorded about replicas itself (launches no container host took). */
  readonly replicaRecords: ReplicaRecord[] = [];
  scrapes = 0;
  /** Replicas launched, in order (a replacement shows as a second launch). */
  readonly launches: string[] = [];
  /** Supervisions started, by replica (a re-attached supervisor shows as a second one). */
  readonly supervisions: string[] = [];
  /** A replica whose next supervisor never heartbeats (a host too busy to answer). */
  silent: string | undefined;
  /** A replica whose next supervisor ends as its host shuts down to restart under the same name. */
  restarting: string | undefined;
  /** From this projection on, recordDeployment fails non-retryably (an activity that gave up). */
  failProjectionsFrom = Infinity;
  /** How many of the next launches fail to start (non-retryably, as a replica that never got healthy). */
  failLaunches = 0;
  /**
   * How long (real ms) a projection takes, by its number counted from the last launch that failed (1 for
   * the first after it): a read model slower than the replicas' backoff. None is slow before a failure.
   */
  projectionDelayMs: (sinceFailedLaunch: number) => number = () => 0;
  private projectionsSinceFailedLaunch: number | undefined;

  get latest(): DeploymentState | undefined {
    return this.projections.at(-1)?.state;
  }

  activities(): Activities {
    const self = this;
    return {
      async recordDeployment(a) {
        if (self.projections.length >= self.failProjectionsFrom && a.state.status !== 'Failed') {
          self.failProjectionsFrom = Infinity; // once
          throw ApplicationFailure.nonRetryable('the read model refused the projection', 'InjectedFault');
        }
        if (self.projectionsSinceFailedLaunch !== undefined) {
          const delay = self.projectionDelayMs(++self.projectionsSinceFailedLaunch);
          if (delay > 0) await new Promise((r) => setTimeout(r, delay));
        }
        self.projections.push({ state: structuredClone(a.state), version: a.version, generation: a.generation });
      },
      async queueBacklog() {
        return 0;
      },
      async httpRequests() {
        return 0;
      },
      async httpMeanRequestMs() {
        return self.meanRequestMs;
      },
      async removeDeployment() {},
      async recordReplica(r) {
        self.replicaRecords.push(r);
      },
      async launchReplica(l) {
        self.launches.push(l.replicaId);
        if (self.failLaunches > 0) {
          self.failLaunches--;
          self.projectionsSinceFailedLaunch = 0;
          throw ApplicationFailure.nonRetryable(`${l.replicaId} never answered its health check`, 'ReplicaFailed');
        }
        self.running.add(l.replicaId);
        return { replicaId: l.replicaId, hostQueue: CONTAINERS_TASK_QUEUE, port: 0 };
      },
      async scrapeReplicaMetric() {
        self.scrapes++;
        if (self.metric instanceof Error) {
          throw ApplicationFailure.nonRetryable(self.metric.message, 'InjectedFault');
        }
        return { total: self.metric, scraped: self.running.size, replicas: self.running.size };
      },
      async stopReplica(s) {
        self.running.delete(s.replicaId);
      },
      async superviseReplica(s) {
        const ctx = Context.current();
        self.supervisions.push(s.replicaId);
        if (self.silent === s.replicaId) {
          self.silent = undefined;
          // Never heartbeats, never ends on its own: the server times it out; the replica runs on.
          // (Only this worker's shutdown ends it.)
          return new Promise<never>((_, reject) =>
            ctx.cancellationSignal.addEventListener('abort', () => reject(ctx.cancellationSignal.reason)),
          );
        }
        if (self.restarting === s.replicaId) {
          self.restarting = undefined;
          // What superviseReplica does on a worker shutdown of a host with a stable name: the replica runs on.
          throw ApplicationFailure.nonRetryable('the host is restarting', HOST_RESTARTING);
        }
        const beat = setInterval(() => heartbeat(), 1000);
        try {
          return await new Promise<never>((_, reject) =>
            ctx.cancellationSignal.addEventListener('abort', () => reject(ctx.cancellationSignal.reason)),
          );
        } finally {
          clearInterval(beat);
          self.running.delete(s.replicaId);
        }
      },
    };
  }
}

/** A deployment's workflow input: one replica of a container, up to `max` with the given autoscaling. */
export function deploymentInput(
  deploymentId: string,
  opts: { min?: number; max?: number; autoscaling?: Record<string, unknown> } = {},
): DeploymentWorkflowInput {
  return {
    deploymentId,
    projectId: 'proj-workflow-tier',
    spec: {
      name: deploymentId,
      image: 'example/replica:1',
      port: 8000,
      min_replicas: opts.min ?? 1,
      max_replicas: opts.max ?? 3,
      termination_grace_period_seconds: 1,
      environment_variables: [],
      autoscaling: opts.autoscaling,
    },
    maxRestartBackoffSeconds: 60,
    autoscaleIntervalSeconds: 15,
    autoscaleCooldownSeconds: 60,
    containerWaitSeconds: 60,
  };
}
