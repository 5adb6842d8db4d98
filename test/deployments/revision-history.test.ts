/**
 * The revision history the state projection writes (db/deployment-revisions.ts): each revision
 * once, a template put back recorded as a rollback to the revision it came from, and a late
 * projection of a deployment that is gone recording nothing instead of failing its activity.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { listRevisions, recordRevision } from '../../db/deployment-revisions';
import { insertDeployment } from '../../db/deployments';
import { migrate } from '../../db/migrate';
import type { DeploymentSpec } from '../../shared/deployments';
import { withScratchDatabase } from '../helpers/scratch-database';
import { createTenant } from '../helpers/tenants';

const spec = (image: string, minReplicas = 1): DeploymentSpec => ({
  name: 'web',
  image,
  port: 8000,
  min_replicas: minReplicas,
  max_replicas: 2,
  termination_grace_period_seconds: 1,
  environment_variables: [],
});

test('revisions are recorded once each; a template put back is a rollback; a deployment that is gone records nothing', async () => {
  await withScratchDatabase(async (db) => {
    await migrate(db);
    const tenant = await createTenant(db);
    await insertDeployment(db, { id: 'dep_web', projectId: tenant.projectId, name: 'web' });
    await recordRevision(db, { deploymentId: 'dep_web', revision: 1, spec: spec('app:1') });
    await recordRevision(db, { deploymentId: 'dep_web', revision: 1, spec: spec('app:1', 2) }); // a later projection
    await recordRevision(db, { deploymentId: 'dep_web', revision: 2, spec: spec('app:2') });
    // Revision 1's image again, with other replica bounds (they are not part of the template).
    await recordRevision(db, { deploymentId: 'dep_web', revision: 3, spec: spec('app:1', 2) });
    const history = await listRevisions(db, 'dep_web', { limit: 10 });
    assert.deepEqual(
      history.map((r) => [r.revision, r.action, r.rolled_back_to, r.spec.image]),
      [
        [3, 'rollback', 1, 'app:1'],
        [2, 'update', null, 'app:2'],
        [1, 'create', null, 'app:1'],
      ],
    );
    assert.equal(history[2].spec.min_replicas, 1, 'the first projection of a revision is the one kept');
    assert.deepEqual(
      (await listRevisions(db, 'dep_web', { before: 3, limit: 1 })).map((r) => r.revision),
      [2],
    );

    await recordRevision(db, { deploymentId: 'dep_gone', revision: 4, spec: spec('app:4') });
    assert.deepEqual(await listRevisions(db, 'dep_gone', { limit: 10 }), []);
  });
});
