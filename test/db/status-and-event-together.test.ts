/**
 * A status and the event that says why are written in one transaction: a reader that sees an
 * upload succeeded, or a deployment ready, also finds the event that says so. Shown by holding the
 * event table locked while the activity writes: its status must not be visible before its event.
 * (Written as two statements, the status was: a user polling between the two saw a finished
 * upload, or an endpoint's deployment ready, without its event.)
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import pg from 'pg';
import { createDeploymentControlActivities } from '../../activities/deployments';
import { createModelUploadActivities } from '../../activities/model-uploads';
import { insertDeployment } from '../../db/deployments';
import { insertEndpoint, insertEndpointDeployment } from '../../db/endpoints';
import { migrate } from '../../db/migrate';
import { insertRegistryModel } from '../../db/models';
import { insertUpload, listUploadEvents } from '../../db/model-uploads';
import type { Db } from '../../db/pool';
import { FilesystemBlobStore } from '../../providers/storage/filesystem';
import type { DeploymentState } from '../../shared/deployments';
import { lockWaitOrDone, withScratchDatabase } from '../helpers/scratch-database';
import { createTenant } from '../helpers/tenants';

const blobDir = mkdtempSync(path.join(tmpdir(), 'gantry-status-event-'));
after(() => rmSync(blobDir, { recursive: true, force: true }));

/**
 * Runs `write` while another transaction holds `table` locked against writes, and returns what a
 * third session reads with `read` while the write waits on that lock; then lets the write finish.
 */
async function readWhileEventsLocked<T>(
  db: Db,
  table: string,
  write: () => Promise<unknown>,
  read: (reader: pg.Client) => Promise<T>,
): Promise<T> {
  const locker = await db.connect();
  const reader = new pg.Client({ connectionString: db.options.connectionString });
  await reader.connect();
  let writing: Promise<unknown> | undefined;
  try {
    await locker.query('BEGIN');
    await locker.query(`LOCK TABLE ${table} IN EXCLUSIVE MODE`);
    let written = false;
    writing = write().then(() => (written = true));
    await lockWaitOrDone(db, () => written);
    assert.equal(written, false, `the write waits for ${table}`);
    const seen = await read(reader);
    await locker.query('COMMIT');
    await writing;
    return seen;
  } finally {
    // On a failure before the commit: the lock let go, and the write's own end awaited, so that
    // neither outlives the test.
    await locker.query('ROLLBACK').catch(() => undefined);
    locker.release();
    await writing?.catch(() => undefined);
    await reader.end();
  }
}

test('a model upload is not seen succeeded before its upload.succeeded event is there', async () => {
  await withScratchDatabase(async (db) => {
    await migrate(db);
    const tenant = await createTenant(db);
    await insertRegistryModel(db, {
      id: 'model-race',
      projectId: tenant.projectId,
      name: 'race',
      weightsType: 'WEIGHTS_TYPE_DEFAULT',
    });
    await insertUpload(db, {
      id: 'upload-race',
      projectId: tenant.projectId,
      modelId: 'model-race',
      remoteUrl: 'https://example.com/model.tar',
      maxRestarts: 0,
    });
    const activities = createModelUploadActivities({
      db,
      blobs: new FilesystemBlobStore(blobDir),
      policy: { allowPrivateHosts: false, maxBytes: 1 << 20 },
      storageQuotaBytes: 0,
    });
    const statusMeanwhile = await readWhileEventsLocked(
      db,
      'registry_upload_events',
      () =>
        activities.finishUpload({
          uploadId: 'upload-race',
          status: 'REMOTE_UPLOAD_STATUS_SUCCEEDED',
          message: 'Stored.',
        }),
      async (reader) =>
        (await reader.query('SELECT status FROM registry_uploads WHERE id = $1', ['upload-race'])).rows[0].status,
    );
    assert.equal(statusMeanwhile, 'REMOTE_UPLOAD_STATUS_PENDING', 'not succeeded before its event');
    const events = await listUploadEvents(db, 'upload-race', 0, 10);
    assert.deepEqual(
      events.map((e: { type: string }) => e.type),
      ['upload.succeeded'],
    );
  });
});

test("an endpoint's deployment is not seen ready before its deployment.ready event is there", async () => {
  await withScratchDatabase(async (db) => {
    await migrate(db);
    const tenant = await createTenant(db);
    await insertDeployment(db, { id: 'dep-race', projectId: tenant.projectId, name: 'race' });
    await insertEndpoint(db, {
      id: 'ep-race',
      projectId: tenant.projectId,
      name: 'race',
      visibility: 'VISIBILITY_PRIVATE',
    });
    await insertEndpointDeployment(db, {
      id: 'epd-race',
      endpointId: 'ep-race',
      projectId: tenant.projectId,
      name: 'race',
      model: 'race',
      modelId: 'race',
      autoscaling: {},
      enableLora: false,
      hardware: '1x_nvidia_h100_80gb_sxm',
      containerDeploymentId: 'dep-race',
    });
    const control = createDeploymentControlActivities({ db });
    const state = (status: string): DeploymentState =>
      ({
        revision: 1,
        spec: { name: 'race', image: 'registry.example.com/race:1', min_replicas: 1, max_replicas: 1 },
        desired_replicas: 1,
        status,
        deleted: false,
      }) as unknown as DeploymentState;
    const events = async () =>
      (await db.query('SELECT type FROM endpoint_events WHERE endpoint_id = $1 ORDER BY id', ['ep-race'])).rows.map(
        (r) => r.type,
      );
    await control.recordDeployment({ deploymentId: 'dep-race', state: state('Updating'), version: 1, generation: 0 });
    const updating = await events();
    const statusMeanwhile = await readWhileEventsLocked(
      db,
      'endpoint_events',
      () => control.recordDeployment({ deploymentId: 'dep-race', state: state('Ready'), version: 2, generation: 0 }),
      async (reader) =>
        (await reader.query('SELECT status FROM deployments WHERE id = $1', ['dep-race'])).rows[0].status,
    );
    assert.equal(statusMeanwhile, 'Updating', 'not ready before its event');
    assert.deepEqual(await events(), [...updating, 'deployment.ready']);
    // A late projection (an earlier version, written after) changes nothing and says nothing.
    await control.recordDeployment({ deploymentId: 'dep-race', state: state('Updating'), version: 1, generation: 0 });
    assert.deepEqual(await events(), [...updating, 'deployment.ready'], 'no event of a late projection');
    assert.equal(
      (await db.query('SELECT status FROM deployments WHERE id = $1', ['dep-race'])).rows[0].status,
      'Ready',
    );
  });
});
