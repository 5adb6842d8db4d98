/**
 * Recorded blob deletions (providers/storage/blob-deletions.ts) against real PostgreSQL and real
 * files: a key taken back by a writer is not deleted under it, even by a delete already under way,
 * and a key storage refuses stays recorded without holding up the others.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { describe, test } from 'node:test';
import { reclaimBlobKeys, scheduleBlobDeletions, scheduledBlobDeletions } from '../../db/blob-deletions';
import { migrate } from '../../db/migrate';
import type { Db } from '../../db/pool';
import { deleteScheduledBlobs, retryBlobDeletions } from '../../providers/storage/blob-deletions';
import type { BlobStore } from '../../providers/storage/blob-store';
import { FilesystemBlobStore } from '../../providers/storage/filesystem';
import { lockWaitOrDone, withScratchDatabase } from '../helpers/scratch-database';

async function withStore(fn: (db: Db, store: FilesystemBlobStore, dir: string) => Promise<void>) {
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-blob-deletions-'));
  try {
    await withScratchDatabase(async (db) => {
      await migrate(db);
      await fn(db, new FilesystemBlobStore(dir), dir);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const write = (store: BlobStore, key: string, text: string) =>
  store.put(key, Readable.from([Buffer.from(text)]), { maxBytes: 1024 });

describe('blob deletions', () => {
  test('a key taken back before its blob is written again is not deleted by a retry round', async () => {
    await withStore(async (db, store) => {
      const key = 'registry/ml_x/rv_y/model.safetensors';
      await write(store, key, 'first attempt');
      await scheduleBlobDeletions(db, [key]); // the model was deleted, and storage refused
      await reclaimBlobKeys(db, [key]); // the registration's retry takes the key back
      await write(store, key, 'second attempt');
      const round = await retryBlobDeletions(db, store);
      assert.deepEqual(round.deleted, []);
      assert.equal(await store.size(key), 'second attempt'.length);
    });
  });

  test('taking a key back waits for a delete under way, so the blob written after it stays', async () => {
    await withStore(async (db, store) => {
      const key = 'registry/ml_x/rv_y/config.json';
      await write(store, key, 'old');
      await scheduleBlobDeletions(db, [key]);
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let deleting!: () => void;
      const started = new Promise<void>((r) => (deleting = r));
      const slow: BlobStore = {
        put: store.put.bind(store),
        read: store.read.bind(store),
        size: store.size.bind(store),
        localPath: store.localPath.bind(store),
        async delete(k) {
          deleting();
          await held; // storage is slow to answer
          await store.delete(k);
        },
      };
      const round = deleteScheduledBlobs(db, slow, [key]);
      await started;
      let reclaimed = false;
      const reclaim = reclaimBlobKeys(db, [key]).then(() => (reclaimed = true));
      try {
        await lockWaitOrDone(db, () => reclaimed);
        assert.equal(reclaimed, false, 'the writer waits while the delete is under way');
      } finally {
        release(); // else the round's transaction stays open and the scratch database never closes
      }
      await reclaim;
      assert.deepEqual((await round).deleted, [key]);
      await write(store, key, 'new');
      assert.deepEqual((await retryBlobDeletions(db, store)).deleted, []);
      assert.equal(await store.size(key), 'new'.length);
    });
  });

  test('a key storage refuses stays recorded, the others go, and it is deleted once storage takes it', async () => {
    await withStore(async (db, store, dir) => {
      await write(store, 'files/p/a', 'a');
      await write(store, 'files/p/b', 'b');
      await scheduleBlobDeletions(db, ['files/p/a']);
      await new Promise((r) => setTimeout(r, 20));
      await scheduleBlobDeletions(db, ['files/p/b']);
      let refusing = true;
      const flaky: BlobStore = {
        put: store.put.bind(store),
        read: store.read.bind(store),
        size: store.size.bind(store),
        localPath: store.localPath.bind(store),
        async delete(k) {
          if (refusing && k === 'files/p/a') throw new Error('injected: storage refuses');
          await store.delete(k);
        },
      };
      const first = await retryBlobDeletions(db, flaky);
      assert.deepEqual(first.deleted, ['files/p/b']);
      assert.deepEqual(
        first.failed.map((f) => f.key),
        ['files/p/a'],
      );
      assert.ok(existsSync(path.join(dir, 'files/p/a')), 'a refused blob stays');
      assert.deepEqual(await scheduledBlobDeletions(db, 10), ['files/p/a'], 'and stays recorded');
      refusing = false;
      assert.deepEqual((await retryBlobDeletions(db, flaky)).deleted, ['files/p/a']);
      assert.equal(existsSync(path.join(dir, 'files/p/a')), false);
      assert.deepEqual(await scheduledBlobDeletions(db, 10), []);
    });
  });
});
