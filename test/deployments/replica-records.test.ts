/**
 * What a deployment's replica_events are made of: a crash of a revision that already crashed
 * lately is a crash loop (CrashLoopBackOff, what the official CLI watches for), and only the most
 * recent ended replicas are kept, so a deployment that crashes for days lists a bounded few.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  insertDeployment,
  listReplicas,
  pruneEndedReplicas,
  recordReplicaCrash,
  upsertReplica,
} from '../../db/deployments';
import { migrate } from '../../db/migrate';
import { newId } from '../../platform/ids';
import { withScratchDatabase } from '../helpers/scratch-database';
import { createTenant } from '../helpers/tenants';

test('a crash is a crash loop when another replica of the same revision crashed in the last 10 minutes', async () => {
  await withScratchDatabase(async (db) => {
    await migrate(db);
    const tenant = await createTenant(db);
    const deploymentId = newId('dep');
    await insertDeployment(db, { id: deploymentId, projectId: tenant.projectId, name: 'crashy' });
    const crash = (replicaId: string, revision: number) =>
      recordReplicaCrash(db, {
        deploymentId,
        replicaId,
        revision,
        image: 'img',
        status: 'Failed',
        reason: 'StartFailed',
        message: 'exited with code 3',
      });
    const reasonOf = async (replicaId: string) =>
      (await listReplicas(db, deploymentId)).find((r) => r.replica_id === replicaId)!;

    await crash('r-1', 1);
    assert.equal((await reasonOf('r-1')).reason, 'StartFailed', 'a first crash is only a crash');
    await crash('r-2', 2);
    assert.equal((await reasonOf('r-2')).reason, 'StartFailed', 'another revision has its own count');
    await crash('r-3', 1);
    const looping = await reasonOf('r-3');
    assert.equal(looping.reason, 'CrashLoopBackOff');
    assert.equal(looping.status, 'Failed');
    assert.match(looping.message!, /^exited with code 3; 2 replicas of revision 1 crashed in the last 10 minutes/);

    // Crashes long ago are not a loop.
    await db.query(
      `UPDATE deployment_replicas SET updated_at = now() - interval '11 minutes' WHERE deployment_id = $1`,
      [deploymentId],
    );
    await crash('r-4', 1);
    assert.equal((await reasonOf('r-4')).reason, 'StartFailed');
  });
});

test('only the 20 most recent ended replicas of a deployment are kept; starting and running ones always', async () => {
  await withScratchDatabase(async (db) => {
    await migrate(db);
    const tenant = await createTenant(db);
    const deploymentId = newId('dep');
    await insertDeployment(db, { id: deploymentId, projectId: tenant.projectId, name: 'long-lived' });
    const base = { deploymentId, revision: 1, image: 'img' };
    await upsertReplica(db, { ...base, replicaId: 'running-0', status: 'Running', port: 9000, ready: true });
    for (let i = 1; i <= 30; i++) {
      const status = ['Exited', 'Failed', 'Terminated', 'Lost'][i % 4];
      await upsertReplica(db, { ...base, replicaId: `ended-${i}`, status, reason: 'r', message: 'm' });
      // Distinct times, oldest first, whatever the clock's resolution.
      await db.query(
        `UPDATE deployment_replicas SET updated_at = now() - make_interval(secs => $2) WHERE replica_id = $1`,
        [`ended-${i}`, 100 - i],
      );
    }
    await upsertReplica(db, { ...base, replicaId: 'starting-31', status: 'Starting' });

    await pruneEndedReplicas(db, deploymentId);
    const kept = (await listReplicas(db, deploymentId)).map((r) => r.replica_id).sort();
    const expected = [
      'running-0',
      'starting-31',
      ...Array.from({ length: 20 }, (_, k) => `ended-${k + 11}`), // ended-11 … ended-30, the newest
    ].sort();
    assert.deepEqual(kept, expected);
  });
});
