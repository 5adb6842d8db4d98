/**
 * Activities of the adapter load workflow. On a container host (its own queue,
 * `containers@<host>`): put an adapter revision's files on the host, in the
 * directory its replicas of the deployment have mounted, and ask each running
 * replica of the deployment's model server on that host to load it from there (or
 * unload it), counting which replicas took it; the files are on this host's disk,
 * so only its own replicas can read them. On the control queue: which hosts hold
 * the deployment's replicas, and the load state projected into PostgreSQL.
 */
import { hostsOfRunningReplicas, runningReplicaOrigins } from '../db/deployments';
import { deleteAdapterRow, recordAdapterLoad } from '../db/endpoint-adapters';
import type { Db } from '../db/pool';
import { getRevision, listRevisionFiles } from '../db/models';
import type { AdapterFiles } from '../providers/containers/adapter-files';
import { replicaUrl } from '../shared/deployments';

export interface AdapterLoadResult {
  ready: number;
  failed: number;
  total: number;
  /** Why a replica refused it (the model server's words), when one did. */
  reason?: string;
}

/** On a host: `thisHostOnly`, the replicas it holds; without it (runs from before hosts were told apart), all. */
interface OnHost {
  containerDeploymentId: string;
  thisHostOnly?: boolean;
}

export function createAdapterHostActivities({
  db,
  adapters,
  hostQueue,
}: {
  db: Db;
  adapters: AdapterFiles;
  /** This host's own task queue (the `host` of the replicas it holds). */
  hostQueue: string;
}) {
  const replicasOf = (a: OnHost) =>
    runningReplicaOrigins(db, a.containerDeploymentId, a.thisHostOnly ? hostQueue : undefined);
  return {
    async loadAdapter(
      a: OnHost & {
        adapterModelId: string;
        revisionId: string;
      },
    ): Promise<AdapterLoadResult> {
      const revision = await getRevision(db, a.adapterModelId, a.revisionId);
      if (!revision) return { ready: 0, failed: 0, total: 0, reason: `revision ${a.revisionId} no longer exists` };
      const files = (await listRevisionFiles(db, revision.id)).map((f) => ({
        name: f.path,
        blob_key: `${revision.blob_prefix}/${f.path}`,
      }));
      // Where the replicas see it: their deployment's adapter mount (adapter-files.ts).
      const dir = await adapters.put(a.containerDeploymentId, revision.id, files);
      const origins = await replicasOf(a);
      const result: AdapterLoadResult = { ready: 0, failed: 0, total: origins.length };
      await Promise.all(
        origins.map(async (origin) => {
          try {
            const res = await fetch(replicaUrl(origin, '/adapters'), {
              method: 'POST',
              redirect: 'manual', // the host never follows a replica elsewhere
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ name: a.adapterModelId, dir }),
              signal: AbortSignal.timeout(30_000),
            });
            if (res.ok) result.ready++;
            else {
              result.failed++;
              const body = (await res.json().catch(() => ({}))) as { error?: { message?: string } };
              result.reason = body.error?.message ?? `the replica answered HTTP ${res.status}`;
            }
          } catch (err) {
            result.failed++;
            result.reason = `a replica did not answer: ${(err as Error).message}`;
          }
        }),
      );
      return result;
    },

    async unloadAdapter(a: OnHost & { adapterModelId: string }): Promise<number> {
      const origins = await replicasOf(a);
      await Promise.all(
        origins.map((origin) =>
          fetch(replicaUrl(origin, `/adapters/${encodeURIComponent(a.adapterModelId)}`), {
            method: 'DELETE',
            redirect: 'manual',
            signal: AbortSignal.timeout(10_000),
          }).catch(() => undefined),
        ),
      );
      return origins.length;
    },
  };
}

export function createAdapterControlActivities({ db }: { db: Db }) {
  return {
    /** The container hosts holding running replicas of the model server, with how many each. */
    async replicaHosts(a: { containerDeploymentId: string }) {
      return hostsOfRunningReplicas(db, a.containerDeploymentId);
    },
    async recordAdapterLoad(a: Parameters<typeof recordAdapterLoad>[1]) {
      await recordAdapterLoad(db, a);
    },
    async removeAdapter(a: { deploymentId: string; adapterModelId: string }) {
      await deleteAdapterRow(db, a.deploymentId, a.adapterModelId);
    },
  };
}

export type AdapterHostActivities = ReturnType<typeof createAdapterHostActivities>;
export type AdapterControlActivities = ReturnType<typeof createAdapterControlActivities>;
