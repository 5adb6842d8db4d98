/** A job queue in a scratch database (withScratchDatabase), for tests of db/queue.ts's statements. */
import assert from 'node:assert/strict';
import { insertDeployment } from '../../db/deployments';
import { migrate } from '../../db/migrate';
import type { Db } from '../../db/pool';
import { submitJob, type ClaimRequest } from '../../db/queue';
import { newId } from '../../platform/ids';
import { createTenant } from './tenants';

/**
 * Migrates `db`, makes a tenant and its deployment `m`, and submits jobs `job-<i>` with the given
 * priorities, in that order. `claimOf`: a claim of that queue by worker `w`, 30 s.
 */
export async function scratchQueue(db: Db, priorities: number[] = []) {
  await migrate(db);
  const tenant = await createTenant(db);
  const deploymentId = newId('dep');
  await insertDeployment(db, { id: deploymentId, projectId: tenant.projectId, name: 'm' });
  for (const [i, priority] of priorities.entries()) {
    const queued = await submitJob(db, {
      id: `job-${i}`,
      projectId: tenant.projectId,
      model: 'm',
      priority,
      payload: { i },
      info: {},
    });
    assert.ok(queued);
  }
  const claimOf: ClaimRequest = { projectId: tenant.projectId, model: 'm', worker: 'w', timeoutMs: 30_000 };
  return { projectId: tenant.projectId, deploymentId, claimOf };
}
