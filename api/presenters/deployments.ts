/**
 * How a container deployment is shown (the SDK's beta.jig): the deployment with its replicas'
 * events, its secrets (never their values) and its revisions.
 */
import { REVISION_ENV, type DeploymentSpec } from '../../shared/deployments';
import type { RevisionRow } from '../../db/deployment-revisions';
import type { DeploymentRow, ReplicaRow, SecretRow } from '../../db/deployments';

const iso = (d: Date) => new Date(d).toISOString();

export const toSecret = (s: SecretRow) => ({
  id: s.id,
  object: 'secret' as const,
  name: s.name,
  ...(s.description ? { description: s.description } : {}),
  created_by: s.created_by,
  last_updated_by: s.last_updated_by,
  created_at: iso(s.created_at),
  updated_at: iso(s.updated_at),
});

export const toRevisionEvent = (r: RevisionRow) => ({
  object: 'revision_event' as const,
  // Each activation is a revision of its own here (a rollback is counted as the next one).
  event_number: r.revision,
  action: r.action,
  revision_id: String(r.revision),
  revision_number: r.revision,
  image: r.spec.image,
  activated_at: iso(r.created_at),
  ...(r.rolled_back_to ? { rolled_back_to: String(r.rolled_back_to) } : {}),
});

export const toRevision = (revision: number, spec: DeploymentSpec, createdAt: Date) => ({
  ...spec,
  object: 'revision' as const,
  revision_id: String(revision),
  created_at: iso(createdAt),
});

/** A deployment with its replicas (`listReplicas`), each as the replica event the SDK reads. */
export function toDeployment(row: DeploymentRow, replicas: ReplicaRow[]) {
  const events = Object.fromEntries(
    replicas.map((r) => [
      r.replica_id,
      {
        image: r.image,
        revision_id: String(r.revision),
        replica_status: r.status,
        ...(r.reason ? { replica_status_reason: r.reason } : {}),
        ...(r.message ? { replica_status_message: r.message } : {}),
        ...(r.ready_since ? { replica_ready_since: iso(r.ready_since) } : {}),
      },
    ]),
  );
  const spec = row.state.spec;
  return {
    ...spec,
    // What every replica is given besides the spec's own: the revision it runs (the Python CLI's
    // deploy waits for a replica of this revision).
    environment_variables: [...spec.environment_variables, { name: REVISION_ENV, value: String(row.state.revision) }],
    id: row.id,
    object: 'deployment' as const,
    name: row.name,
    status: row.status,
    desired_replicas: row.state.desired_replicas ?? spec.min_replicas,
    ready_replicas: replicas.filter((r) => r.status === 'Running').length,
    replica_events: events,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}
