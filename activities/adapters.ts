/**
 * Activities of the adapter load workflow. On a container host (queue
 * `containers`): put an adapter revision's files on the host and ask every
 * running replica of the deployment's model server to load it (or unload
 * it), counting which replicas took it. On the control queue: project the
 * load state into PostgreSQL.
 */
import { listReplicas } from '../db/deployments';
import { deleteAdapterRow, recordAdapterLoad } from '../db/endpoint-adapters';
import type { Db } from '../db/pool';
import { getRevision, listRevisionFiles } from '../db/models';
import type { VolumeStore } from '../providers/containers/volume-store';

export interface AdapterLoadResult {
  ready: number;
  failed: number;
  total: number;
  /** Why a replica refused it (the model server's words), when one did. */
  reason?: string;
}

async function runningPorts(db: Db, containerDeploymentId: string): Promise<number[]> {
  return (await listReplicas(db, containerDeploymentId))
    .filter((r) => r.status === 'Running' && r.port)
    .map((r) => r.port!);
}

export function createAdapterHostActivities({ db, volumes }: { db: Db; volumes: VolumeStore }) {
  return {
    async loadAdapter(a: {
      containerDeploymentId: string;
      adapterModelId: string;
      revisionId: string;
    }): Promise<AdapterLoadResult> {
      const revision = await getRevision(db, a.adapterModelId, a.revisionId);
      if (!revision) return { ready: 0, failed: 0, total: 0, reason: `revision ${a.revisionId} no longer exists` };
      const files = (await listRevisionFiles(db, revision.id)).map((f) => ({
        name: f.path,
        blob_key: `${revision.blob_prefix}/${f.path}`,
      }));
      const dir = await volumes.materialize(revision.id, 1, files);
      const ports = await runningPorts(db, a.containerDeploymentId);
      const result: AdapterLoadResult = { ready: 0, failed: 0, total: ports.length };
      await Promise.all(
        ports.map(async (port) => {
          try {
            const res = await fetch(`http://127.0.0.1:${port}/adapters`, {
              method: 'POST',
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

    async unloadAdapter(a: { containerDeploymentId: string; adapterModelId: string }): Promise<number> {
      const ports = await runningPorts(db, a.containerDeploymentId);
      await Promise.all(
        ports.map((port) =>
          fetch(`http://127.0.0.1:${port}/adapters/${encodeURIComponent(a.adapterModelId)}`, {
            method: 'DELETE',
            signal: AbortSignal.timeout(10_000),
          }).catch(() => undefined),
        ),
      );
      return ports.length;
    },
  };
}

export function createAdapterControlActivities({ db }: { db: Db }) {
  return {
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
