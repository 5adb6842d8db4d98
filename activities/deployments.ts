/**
 * Activities of the deployment workflow. Replicas run on container hosts:
 * launchReplica (queue `containers`) starts one and returns once its health
 * check answers, naming the host's own queue; superviseReplica (on that host
 * queue) lasts as long as the process does, and stops it gracefully when
 * cancelled. Secrets are resolved here, on the host, and never pass through
 * workflow history.
 */
import { Context, heartbeat } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { SealedValueUnreadable, type Keyring } from '../platform/keyring';
import {
  ADAPTERS_MOUNT_PATH,
  HOST_RESTARTING,
  REVISION_ENV,
  replicaUrl,
  type DeploymentState,
  type LaunchedReplica,
  type ReplicaLaunch,
} from '../shared/deployments';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { recordRevision } from '../db/deployment-revisions';
import {
  deleteDeploymentRow,
  projectDeployment,
  requestsSince,
  meanRequestMsSince,
  sealedSecrets,
  type SealedSecret,
  updateReplicaStatus,
  recordUnfinishedLaunches,
  runningReplicaOrigins,
  upsertReplica,
  type ReplicaRecord,
  recordReplicaCrash,
  pruneEndedReplicas,
} from '../db/deployments';
import { queueMetrics } from '../db/queue';
import { projectSlugOf } from '../db/administration';
import { containerSnapshot, noteContainerChange, noteContainerRemoved } from './endpoint-projection';
import { withTransaction, type Db } from '../db/pool';
import { openFromRow, SEALED_COLUMNS } from '../db/sealed-values';
import { meterReplica, stopDeploymentMeters } from './usage-meters';
import { ReplicaFailed, type ContainerRuntime, type Survivor } from '../providers/containers/runtime';
import type { AdapterFiles } from '../providers/containers/adapter-files';
import { isSafeVolumePath, type VolumeStore } from '../providers/containers/volume-store';
import { ReplicaLeases } from '../providers/containers/replica-leases';
import type { PinnedDir } from '../providers/containers/host-file-uses';
import { contentOfNewVersion, fillEmptyVersion, getVolume, getVolumeVersion } from '../db/deployment-volumes';
import { getRevision, listRevisionFiles } from '../db/models';
import { catalogWeightsDir } from '../providers/containers/catalog-weights';

/** A replica's status, recorded; a running replica is metered by the hour. */
async function recordReplicaStatus(db: Db, r: ReplicaRecord): Promise<void> {
  await upsertReplica(db, r);
  await meterReplica(db, r);
}

/** A replica that crashed, recorded (as a crash loop when it is one: recordReplicaCrash); its meter stops. */
async function recordCrashedReplica(db: Db, r: Parameters<typeof recordReplicaCrash>[1]): Promise<void> {
  await recordReplicaCrash(db, r);
  await meterReplica(db, r);
}

export function createDeploymentControlActivities({ db }: { db: Db }) {
  return {
    async recordDeployment({
      deploymentId,
      state,
      version,
      generation,
    }: {
      deploymentId: string;
      state: DeploymentState;
      /** Counts the projections of one run. */
      version: number;
      /** Counts the runs (continue-as-new); absent from runs started before it existed. */
      generation?: number;
    }) {
      // In one transaction: whoever reads the new status (of the deployment, or of the endpoint it
      // serves) reads the endpoint event that says so, and its revision.
      await withTransaction(db, async (tx) => {
        const before = await containerSnapshot(tx, deploymentId);
        const written = await projectDeployment(tx, deploymentId, state, version, generation);
        await recordRevision(tx, { deploymentId, revision: state.revision, spec: state.spec });
        // A late projection, not written, says nothing of a change either.
        if (written) await noteContainerChange(tx, deploymentId, before, state);
      });
    },
    /** Jobs waiting or running in the deployment's queue (the QueueBacklogPerWorker signal). */
    async queueBacklog({ deploymentId }: { deploymentId: string }): Promise<number> {
      const m = await queueMetrics(db, deploymentId);
      return m.pending + m.running;
    },
    /** Requests the gateway proxied to the deployment over the window (the HTTPTotalRequests signal). */
    async httpRequests({
      deploymentId,
      windowSeconds,
    }: {
      deploymentId: string;
      windowSeconds: number;
    }): Promise<number> {
      return requestsSince(db, deploymentId, windowSeconds);
    },
    /** Mean milliseconds of the requests the gateway proxied over the window (the HTTPAvgRequestDuration signal). */
    async httpMeanRequestMs({
      deploymentId,
      windowSeconds,
    }: {
      deploymentId: string;
      windowSeconds: number;
    }): Promise<number | null> {
      return meanRequestMsSince(db, deploymentId, windowSeconds);
    },
    /** The deployment is gone: its row, replicas and queue go with it. */
    async removeDeployment({ deploymentId }: { deploymentId: string }) {
      await noteContainerRemoved(db, deploymentId);
      await stopDeploymentMeters(db, deploymentId);
      await deleteDeploymentRow(db, deploymentId);
    },
    async recordReplica(r: ReplicaRecord) {
      await recordReplicaStatus(db, r);
    },
  };
}

export function createReplicaActivities(deps: {
  db: Db;
  runtime: ContainerRuntime;
  /** What `runtime.adoptSurvivors()` took over when this host's worker started. */
  survivors: Survivor[];
  volumes: VolumeStore;
  adapters: AdapterFiles;
  /** GANTRY_MODEL_DIR: the catalog models' installed weights, mounted into the model servers of them. */
  modelDir: string;
  hostQueue: string;
  /** Opens sealed values (platform/keyring.ts). */
  keyring?: Keyring;
  /** How long a replica whose supervisor detached keeps running for another to re-attach. */
  adoptionSeconds: number;
  /**
   * The host keeps its name across restarts (GANTRY_CONTAINER_HOST_ID): when its worker shuts down,
   * replicas are left running for the next process to adopt instead of being stopped.
   */
  restartsInPlace?: boolean;
}) {
  const { db, runtime } = deps;
  const leases = new ReplicaLeases(deps.adoptionSeconds * 1000, (replicaId, err) =>
    process.emitWarning(`Replica ${replicaId} nobody supervises could not be stopped: ${(err as Error).message}`),
  );
  // Replicas an earlier worker process of this host left running (it crashed or was killed): their
  // deployments' runs re-attach on this host's queue, which keeps its name (GANTRY_CONTAINER_HOST_ID);
  // one that no run re-attaches to within the lease is stopped.
  // Replicas a host that is gone left on this machine (runtime.ts `Survivor`): their runs watch that
  // host's queue, which nobody serves, so none can re-attach here. Stopped now and recorded so, rather
  // than counted as Running until the adoption window ends; their runs replace them.
  for (const r of deps.survivors.filter((s) => s.orphanedBy)) {
    void (async () => {
      const { orphanedBy, ...replica } = r;
      await runtime.stop(r.replicaId, 2);
      const stopped = { ...replica, status: 'Terminated', reason: 'HostLost' };
      const message = `stopped: its host (${orphanedBy}) no longer runs, and no run of its deployment watches it from another host`;
      await updateReplicaStatus(db, { ...stopped, message });
      await meterReplica(db, stopped);
    })().catch((err: Error) =>
      process.emitWarning(`Replica ${r.replicaId} of a host that is gone could not be stopped: ${err.message}`),
    );
  }
  for (const r of deps.survivors.filter((s) => !s.orphanedBy)) {
    leases.detach(r.replicaId, async () => {
      await runtime.stop(r.replicaId, 2);
      const stopped = { ...r, status: 'Terminated', reason: 'Unsupervised' };
      const message = `stopped: adopted after a restart of its host, and no run of its deployment watched it for ${deps.adoptionSeconds}s`;
      await updateReplicaStatus(db, { ...stopped, message });
      await meterReplica(db, stopped);
    });
  }

  /** Each mount's directory on this host; the version was fixed in the spec when it was deployed. */
  async function resolveMounts(
    l: ReplicaLaunch,
    /** Each directory handed out is pinned here, for the caller to release once the launch is over. */
    pins: PinnedDir[],
  ): Promise<Array<{ mountPath: string; hostDir: string }>> {
    const pinned = (p: PinnedDir) => {
      pins.push(p);
      return p.dir;
    };
    const mounts = [];
    for (const m of l.spec.volumes ?? []) {
      const volume = await getVolume(db, l.projectId, m.name);
      const version = volume && (await getVolumeVersion(db, volume.id, m.version ?? volume.current_version));
      if (!volume || !version) {
        throw new ReplicaFailed(`volume '${m.name}'${m.version ? ` version ${m.version}` : ''} does not exist`);
      }
      // A version made before its files were uploaded (the Python CLI's order) takes them now, once.
      const files = version.files.length
        ? version.files
        : await withTransaction(db, async (tx) => {
            const now = await contentOfNewVersion(tx, volume.project_id, version.source_prefix);
            return fillEmptyVersion(
              tx,
              volume,
              version,
              now.filter((f) => isSafeVolumePath(f.name)),
            );
          });
      mounts.push({
        mountPath: m.mount_path,
        hostDir: pinned(await deps.volumes.materialize(volume.id, version.version, files)),
      });
    }
    for (const m of l.spec.model_mounts ?? []) {
      if (!m.revision_id) {
        // A catalog mount (only the endpoint's model server plan makes one: api/endpoint-serving.ts).
        const dir = catalogWeightsDir(deps.modelDir, m.model_id);
        if (dir instanceof Error) throw new ReplicaFailed(dir.message);
        mounts.push({ mountPath: m.mount_path, hostDir: dir });
        continue;
      }
      const revision = m.revision_id ? await getRevision(db, m.model_id, m.revision_id) : null;
      if (!revision) throw new ReplicaFailed(`model ${m.model_id} revision ${m.revision_id} no longer exists`);
      const files = (await listRevisionFiles(db, revision.id)).map((f) => ({
        name: f.path,
        blob_key: `${revision.blob_prefix}/${f.path}`,
      }));
      // A model revision is immutable, like a volume version: one directory per revision and host.
      mounts.push({ mountPath: m.mount_path, hostDir: pinned(await deps.volumes.materialize(revision.id, 1, files)) });
    }
    // Adapters attached later appear there while the replica runs.
    mounts.push({ mountPath: ADAPTERS_MOUNT_PATH, hostDir: pinned(await deps.adapters.dirOf(l.deploymentId)) });
    return mounts;
  }

  return {
    async launchReplica(l: ReplicaLaunch): Promise<LaunchedReplica> {
      const base = { deploymentId: l.deploymentId, replicaId: l.replicaId, revision: l.revision, image: l.spec.image };
      await recordReplicaStatus(db, { ...base, status: 'Starting', host: deps.hostQueue });
      // An earlier launch that its host took down with it no longer says it is starting.
      await recordUnfinishedLaunches(db, l.deploymentId, l.replicaId);
      await pruneEndedReplicas(db, l.deploymentId);
      const env: Record<string, string> = {
        GANTRY_DEPLOYMENT: l.spec.name,
        GANTRY_REPLICA_ID: l.replicaId,
        // The revision this replica runs, by the name the official jig tooling reads (see the API's view).
        [REVISION_ENV]: String(l.revision),
      };
      const wanted = l.spec.environment_variables.filter((e) => e.value_from_secret).map((e) => e.value_from_secret!);
      const sealed = wanted.length ? await sealedSecrets(db, l.projectId, wanted) : new Map<string, SealedSecret>();
      for (const e of l.spec.environment_variables) {
        if (e.value_from_secret) {
          const box = sealed.get(e.value_from_secret);
          let value: string | undefined;
          let why = `secret '${e.value_from_secret}' does not exist`;
          try {
            value =
              box &&
              deps.keyring &&
              openFromRow(
                deps.keyring,
                SEALED_COLUMNS.deploymentSecret,
                { id: box.id, projectId: l.projectId },
                box.sealed,
              );
          } catch (err) {
            // Sealed under a key this installation no longer has: retrying cannot help.
            if (!(err instanceof SealedValueUnreadable)) throw err;
            why = `secret '${e.value_from_secret}' cannot be opened: ${err.message}`;
          }
          if (value === undefined) {
            await recordReplicaStatus(db, { ...base, status: 'Failed', reason: 'SecretNotFound', message: why });
            throw ApplicationFailure.nonRetryable(`For ${e.name}: ${why}.`, 'ReplicaFailed');
          }
          env[e.name] = value;
        } else env[e.name] = e.value ?? '';
      }
      // The files a replica mounts are kept from the host's sweeps until it has them mounted (a
      // runtime reports its replicas' mounts from then on) or has failed to start.
      const pins: PinnedDir[] = [];
      try {
        const port = await runtime.launch(
          {
            deploymentId: l.deploymentId,
            projectId: l.projectId,
            // Whose images it may pull (podman-runtime.ts).
            projectSlug: await projectSlugOf(db, l.projectId),
            replicaId: l.replicaId,
            image: l.spec.image,
            command: l.spec.command ?? [],
            args: l.spec.args ?? [],
            containerPort: l.spec.port,
            cpu: l.spec.cpu,
            memoryGiB: l.spec.memory,
            storageGiB: l.spec.storage,
            env,
            healthPath: l.spec.health_check_path ?? '/',
            healthTimeoutMs: 60_000,
            mounts: await resolveMounts(l, pins),
          },
          () => heartbeat(),
        );
        await recordReplicaStatus(db, {
          ...base,
          status: 'Running',
          port,
          address: runtime.address,
          host: deps.hostQueue,
          ready: true,
        });
        return { replicaId: l.replicaId, hostQueue: deps.hostQueue, port };
      } catch (err) {
        if (!(err instanceof ReplicaFailed)) throw err;
        await recordCrashedReplica(db, { ...base, status: 'Failed', reason: 'StartFailed', message: err.message });
        throw ApplicationFailure.nonRetryable(err.message, 'ReplicaFailed');
      } finally {
        for (const pin of pins) pin.release();
      }
    },

    /**
     * The CustomMetric signal: scrapes `/metrics` (Prometheus text format) of every running replica
     * of the deployment, on whichever host (at its address), and sums the named metric over them.
     */
    async scrapeReplicaMetric({ deploymentId, metricName }: { deploymentId: string; metricName: string }) {
      const running = await runningReplicaOrigins(db, deploymentId);
      let total = 0;
      let scraped = 0;
      await Promise.all(
        running.map(async (origin) => {
          try {
            // From the host's network: a redirect is an unreadable metric, never followed.
            const res = await fetch(replicaUrl(origin, '/metrics'), {
              redirect: 'manual',
              signal: AbortSignal.timeout(2000),
            });
            if (!res.ok) return;
            const family = parsePrometheusTextFormat(await res.text()).find((f) => f.name === metricName);
            for (const sample of family?.metrics ?? []) total += Number(sample.value ?? 0);
            scraped++;
          } catch {
            // an unreachable replica contributes nothing this round
          }
        }),
      );
      return { total, scraped, replicas: running.length };
    },

    /**
     * Stops a replica a run left behind (its workflow ended without deleting it): no supervisor
     * watches it any more, so the deleting run stops it here, on the host that holds it.
     */
    async stopReplica(s: {
      deploymentId: string;
      replicaId: string;
      revision: number;
      image: string;
      graceSeconds: number;
    }) {
      leases.attach(s.replicaId); // calls off a pending expiry: this stop replaces it
      leases.end(s.replicaId);
      await runtime.stop(s.replicaId, s.graceSeconds);
      await recordReplicaStatus(db, {
        deploymentId: s.deploymentId,
        replicaId: s.replicaId,
        revision: s.revision,
        image: s.image,
        status: 'Terminated',
        reason: 'Stopped',
        message: `stopped with its deployment (grace ${s.graceSeconds}s)`,
      });
    },

    /**
     * Lasts while the replica runs. A cancellation the workflow asked for stops it (SIGTERM, then
     * SIGKILL after the grace period), and so does a shutdown of this host. When the run that
     * watched it is gone (it continued as new, or ended) or the server timed this attempt out, the
     * replica is left running for the next supervisor, and stopped if none comes (ReplicaLeases).
     */
    async superviseReplica(s: {
      deploymentId: string;
      replicaId: string;
      revision: number;
      image: string;
      graceSeconds: number;
    }) {
      const base = { deploymentId: s.deploymentId, replicaId: s.replicaId, revision: s.revision, image: s.image };
      const ctx = Context.current();
      const beat = setInterval(() => heartbeat(), 1000);
      leases.attach(s.replicaId);
      try {
        const exit = await runtime.waitForExit(s.replicaId, ctx.cancellationSignal);
        leases.end(s.replicaId);
        if (!exit) {
          await recordReplicaStatus(db, {
            ...base,
            status: 'Lost',
            reason: 'HostLost',
            message: 'the host no longer runs this replica',
          });
          throw ApplicationFailure.nonRetryable(
            `Replica ${s.replicaId} is not running on ${deps.hostQueue}.`,
            'ReplicaExited',
          );
        }
        const message = `exited with code ${exit.code}${exit.signal ? `, signal ${exit.signal}` : ''}`;
        await recordCrashedReplica(db, { ...base, status: 'Exited', reason: 'ProcessExited', message });
        throw ApplicationFailure.nonRetryable(`Replica ${s.replicaId} ${message}.`, 'ReplicaExited');
      } catch (err) {
        if (!ctx.cancellationSignal.aborted) throw err;
        const why = ctx.cancellationDetails;
        if (why?.workerShutdown && deps.restartsInPlace) {
          // The next process of this host adopts the replica (adoptSurvivors) and its run re-attaches.
          leases.end(s.replicaId);
          throw ApplicationFailure.nonRetryable(
            `The host ${deps.hostQueue} is restarting; replica ${s.replicaId} runs on for its next process.`,
            HOST_RESTARTING,
          );
        }
        if (why?.notFound || why?.timedOut) {
          leases.detach(s.replicaId, async () => {
            await runtime.stop(s.replicaId, s.graceSeconds);
            await recordReplicaStatus(db, {
              ...base,
              status: 'Terminated',
              reason: 'Unsupervised',
              message: `stopped: no run of its deployment watched it for ${deps.adoptionSeconds}s`,
            });
          });
          throw err;
        }
        leases.end(s.replicaId);
        await runtime.stop(s.replicaId, s.graceSeconds);
        await recordReplicaStatus(db, {
          ...base,
          status: 'Terminated',
          reason: 'Stopped',
          message: `stopped (grace ${s.graceSeconds}s)`,
        });
        throw err;
      } finally {
        clearInterval(beat);
      }
    },
  };
}

export type DeploymentControlActivities = ReturnType<typeof createDeploymentControlActivities>;
export type ReplicaActivities = ReturnType<typeof createReplicaActivities>;
