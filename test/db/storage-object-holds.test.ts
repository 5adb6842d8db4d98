/**
 * A volume version being made and a newer upload of one of its paths arriving at the same moment:
 * the upload waits for the version, and does not drop the object the version names (it used to
 * check "held by a version" against a snapshot taken before the version committed, and drop the
 * object and its blob from under it).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { contentOfNewVersion, insertVolume } from '../../db/deployment-volumes';
import { migrate } from '../../db/migrate';
import { getStorageObject, insertStorageUpload, storageObjectUploaded } from '../../db/storage-objects';
import { lockWaitOrDone, withScratchDatabase } from '../helpers/scratch-database';
import { createTenant } from '../helpers/tenants';

test('an upload arriving while a version takes the older object waits, and leaves that object to the version', async () => {
  await withScratchDatabase(async (db) => {
    await migrate(db);
    const tenant = await createTenant(db);
    await insertStorageUpload(db, { id: 'sobj_old', projectId: tenant.projectId, path: 'weights/1/a.bin' });
    assert.deepEqual(await storageObjectUploaded(db, 'sobj_old', { bytes: 3, blobKey: 'storage/p/old' }), []);
    await insertStorageUpload(db, { id: 'sobj_new', projectId: tenant.projectId, path: 'weights/1/a.bin' });

    const making = await db.connect();
    try {
      await making.query('BEGIN');
      const files = await contentOfNewVersion(making, tenant.projectId, 'weights/1');
      assert.deepEqual(
        files.map((f) => f.file_id),
        ['sobj_old'],
      );
      // The newer upload's bytes arrive before the version commits.
      let arrived = false;
      const arrival = storageObjectUploaded(db, 'sobj_new', { bytes: 4, blobKey: 'storage/p/new' }).then((dropped) => {
        arrived = true;
        return dropped;
      });
      await lockWaitOrDone(db, () => arrived);
      assert.equal(arrived, false, 'the arrival waits for the version being made');
      await insertVolume(making, {
        id: 'vol_race',
        projectId: tenant.projectId,
        name: 'race',
        sourcePrefix: 'weights/1',
        files,
      });
      await making.query('COMMIT');
      assert.deepEqual(await arrival, [], 'the object the version names is not dropped');
    } finally {
      making.release();
    }
    assert.ok(await getStorageObject(db, 'sobj_old'), 'the version still finds its object');
    assert.equal((await getStorageObject(db, 'sobj_new'))?.blob_key, 'storage/p/new');
  });
});
