/**
 * A cluster's GPU-hour meters follow the states its workflow projects
 * (activities/clusters.ts projectClusterState): a projection that arrives after
 * a newer one neither overwrites the state nor moves the meters back, and a
 * cluster whose row is gone stops costing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { createClusterActivities } from '../../activities/clusters';
import { deleteClusterRow, insertCluster } from '../../db/clusters';
import { migrate } from '../../db/migrate';
import type { Db } from '../../db/pool';
import type { ClusterNode, ClusterState } from '../../shared/clusters';
import { withScratchDatabase } from '../helpers/scratch-database';
import { createTenant } from '../helpers/tenants';

const CLUSTER = 'clu-meters';

function stateWith(version: number, nodes: number): ClusterState {
  const node = (i: number) => ({ node_id: `n${i}`, num_gpus: 8, capacity: 'on_demand' }) as ClusterNode;
  return {
    version,
    phase: 'CLUSTER_PHASE_READY',
    spec: { cluster_name: 'metered', region: 'sim-us-east-1', gpu_type: 'H100_SXM', billing_type: 'ON_DEMAND' },
    gpu_worker_nodes: Array.from({ length: nodes }, (_, i) => node(i)),
  } as ClusterState;
}

/** The GPUs each open meter of the cluster counts, and how many meters were closed. */
async function meters(db: Db) {
  const { rows } = await db.query<{ units: string; open: boolean }>(
    `SELECT units, ended_at IS NULL AS open FROM metered_intervals WHERE starts_with(meter_key, $1) ORDER BY id`,
    [`cluster/${CLUSTER}/`],
  );
  return { open: rows.filter((r) => r.open).map((r) => Number(r.units)), closed: rows.filter((r) => !r.open).length };
}

test('GPU-hour meters follow the newest projected state, never an older one, and stop with the cluster', async () => {
  await withScratchDatabase(async (db) => {
    await migrate(db);
    const t = await createTenant(db);
    await insertCluster(db, {
      id: CLUSTER,
      projectId: t.projectId,
      workflowId: `cluster/${CLUSTER}`,
      state: stateWith(1, 0),
    });
    const { projectClusterState } = createClusterActivities({ db, fleet: {} as never });
    const project = (version: number, nodes: number) =>
      projectClusterState({ clusterId: CLUSTER, state: stateWith(version, nodes) });

    await project(2, 1);
    assert.deepEqual(await meters(db), { open: [8], closed: 0 });
    await project(2, 1);
    assert.deepEqual(await meters(db), { open: [8], closed: 0 }, 'the same state again changes nothing');

    await project(4, 2);
    assert.deepEqual(await meters(db), { open: [16], closed: 1 });
    await project(3, 1); // finished after version 4: stale
    assert.deepEqual(await meters(db), { open: [16], closed: 1 }, 'an older state does not move the meter back');
    const { rows } = await db.query('SELECT version FROM clusters WHERE id = $1', [CLUSTER]);
    assert.equal(rows[0].version, 4);

    await deleteClusterRow(db, CLUSTER);
    await project(5, 2);
    assert.deepEqual(await meters(db), { open: [], closed: 2 }, 'a cluster that is gone stops costing');
  });
});
