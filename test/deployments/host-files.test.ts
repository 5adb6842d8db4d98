/**
 * The files a container host builds for its replicas to mount (a volume's version, a model
 * revision, a deployment's adapters) stay while a replica mounts them, and go once none has for
 * GANTRY_HOST_FILES_KEEP_SECONDS: a host's disk does not fill with the weights of deployments
 * long gone. A launch racing a sweep always gets its directory whole, and what a crash left half
 * built is removed too. Replicas' logs are kept within GANTRY_REPLICA_LOG_MAX_BYTES (a log and
 * the one before it), the logs route and its followers reading across a rotation, and go with
 * their deployment.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { VolumeStore } from '../../providers/containers/volume-store';
import { call, eventually, startTestPlatform, uploadValidated, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import { deployHttpReplica } from '../helpers/deployments';

const KEEP_SECONDS = 2;
const LOG_MAX_BYTES = 8192;
let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startTestPlatform({
    env: { GANTRY_HOST_FILES_KEEP_SECONDS: String(KEEP_SECONDS), GANTRY_REPLICA_LOG_MAX_BYTES: String(LOG_MAX_BYTES) },
  });
  t = await createTenant(p.db);
});
after(() => p.stop());

const api = (method: string, url: string, json?: unknown) => call(p.baseUrl, method, `/v1${url}`, { key: t.key, json });
const line = JSON.stringify({ text: 'asset line' }) + '\n';

async function runningPort(deploymentId: string): Promise<number> {
  const rows = await eventually(
    () =>
      p.db
        .query<{ port: number }>(
          `SELECT port FROM deployment_replicas WHERE deployment_id = $1 AND status = 'Running'`,
          [deploymentId],
        )
        .then((r) => r.rows),
    (r) => r.length === 1,
    60_000,
  );
  return rows[0].port;
}
const readThrough = async (port: number, file: string) => {
  const res = await fetch(`http://127.0.0.1:${port}/file?path=${encodeURIComponent(file)}`);
  return { status: res.status, text: await res.text() };
};

describe("a container host's files for its replicas", () => {
  test('stay while mounted, go once no replica has used them for the keep time, and come back when needed', async () => {
    await uploadValidated(p, t.key, 'assets-a.jsonl', line);
    const volume = await api('POST', '/deployments/storage/volumes', {
      name: 'assets',
      type: 'readOnly',
      content: { type: 'files', source_prefix: 'assets-' },
    });
    assert.equal(volume.status, 200, JSON.stringify(volume.body));
    const withVolume = { volumes: [{ name: 'assets', mount_path: '/data/assets' }] };
    const dep = await deployHttpReplica(p, t.key, 'web', withVolume);
    const port = await runningPort(dep.id);
    assert.deepEqual(await readThrough(port, 'data/assets/assets-a.jsonl'), { status: 200, text: line });

    const volumeDir = path.join(p.config.dataDir, 'deployment-volumes', volume.body.id);
    const versionDir = path.join(volumeDir, 'v1');
    const adaptersDir = path.join(p.config.dataDir, 'deployment-adapters', dep.id);
    const logsDir = path.join(p.config.dataDir, 'deployments', dep.id);
    assert.ok(existsSync(versionDir) && existsSync(adaptersDir) && existsSync(logsDir));

    // A sweep with no keep time at all leaves what the running replica mounts.
    const swept = await p.housekeeping.files.sweep(0);
    assert.ok(!swept.includes(versionDir) && !swept.includes(adaptersDir), JSON.stringify(swept));
    assert.deepEqual(await readThrough(port, 'data/assets/assets-a.jsonl'), { status: 200, text: line });

    // The deployment goes: the host's own sweeps remove its files once the keep time has passed.
    // The version's last use is the last sweep that found it mounted: at most one sweep interval
    // (half the keep time) before the deployment went.
    assert.equal((await api('DELETE', '/deployments/web')).status, 200);
    const gone = Date.now();
    await eventually(
      async () => existsSync(versionDir),
      (there) => !there,
      30_000,
    );
    assert.ok(Date.now() - gone >= (KEEP_SECONDS * 1000) / 2, `removed ${Date.now() - gone} ms after, not kept`);
    await eventually(
      async () => [existsSync(volumeDir), existsSync(adaptersDir), existsSync(logsDir)],
      (left) => left.every((x) => !x),
      30_000,
    );

    // A new deployment of the same volume builds it again.
    const again = await deployHttpReplica(p, t.key, 'web-again', withVolume);
    const port2 = await runningPort(again.id);
    assert.deepEqual(await readThrough(port2, 'data/assets/assets-a.jsonl'), { status: 200, text: line });
    assert.ok(existsSync(versionDir));
    assert.equal((await api('DELETE', '/deployments/web-again')).status, 200);
  });

  test("a replica's log stays within its limit; the logs route and a follower read across rotations and miss nothing", async () => {
    const dep = await deployHttpReplica(p, t.key, 'chatty');
    const port = await runningPort(dep.id);
    const [{ replica_id: replicaId }] = (
      await p.db.query<{ replica_id: string }>('SELECT replica_id FROM deployment_replicas WHERE deployment_id = $1', [
        dep.id,
      ])
    ).rows;
    const logFile = path.join(p.config.dataDir, 'deployments', dep.id, `${replicaId}.log`);
    const rotatedInode = () => (existsSync(`${logFile}.1`) ? statSync(`${logFile}.1`).ino : 0);

    const stream = await fetch(`${p.baseUrl}/v1/deployments/chatty/logs?follow=true`, {
      headers: { authorization: `Bearer ${t.key}` },
    });
    assert.equal(stream.status, 200);
    const reader = stream.body!.pipeThrough(new TextDecoderStream()).getReader();
    let received = '';
    // False when the stream ends, or has not brought the needle within 30 s.
    const readUntil = async (needle: string) => {
      const giveUp = setTimeout(() => void reader.cancel(), 30_000);
      try {
        while (!received.includes(needle)) {
          const { value, done } = await reader.read();
          if (done) return false;
          received += value;
        }
        return true;
      } finally {
        clearTimeout(giveUp);
      }
    };
    assert.ok(await readUntil('listening on'), 'the tail comes first');

    const text = (i: number) => `line-${String(i).padStart(4, '0')}-${'x'.repeat(100)}`;
    let written = 0;
    const batch = async () => {
      for (const end = written + 100; written < end; written++)
        await fetch(`http://127.0.0.1:${port}/log?text=${text(written)}`, { method: 'POST' });
    };
    // A batch over the limit: the host's own check rotates the log within seconds.
    await batch();
    await eventually(
      async () => rotatedInode(),
      (ino) => ino !== 0,
      20_000,
    );
    // Then rotations at known moments, between batches, so no line falls in a copy's window (where
    // copytruncate may lose one): the host's timers stop, and the test rotates as they would, the
    // follower reading at least once between two rotations, as it does at the checks' pace (5 s).
    await p.housekeeping.stop();
    const firstBatch = written;
    for (let round = 0; round < 2; round++) {
      await batch();
      assert.ok(await readUntil(text(written - 1)), 'the follower got the batch');
      assert.deepEqual(await p.housekeeping.logs.rotate(), [logFile]);
    }
    await batch();
    assert.ok(await readUntil(text(written - 1)), 'the follower got the last line');
    const followed = received
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l).line as string)
      .filter((l) => l.includes(': line-'))
      .map((l) => Number(l.slice(l.indexOf('line-') + 5, l.indexOf('line-') + 9)));
    for (let i = 1; i < followed.length; i++)
      assert.ok(followed[i] > followed[i - 1], `${followed[i]} after ${followed[i - 1]}`);
    assert.deepEqual(
      followed.filter((n) => n >= firstBatch),
      Array.from({ length: written - firstBatch }, (_, i) => firstBatch + i),
      'every line once, in order, across two rotations',
    );
    await reader.cancel();

    // The log and the one before it stay near the limit (plus what was written between two checks).
    assert.deepEqual(await p.housekeeping.logs.rotate(), [logFile]);
    assert.ok(statSync(logFile).size <= LOG_MAX_BYTES, String(statSync(logFile).size));
    assert.ok(statSync(`${logFile}.1`).size <= LOG_MAX_BYTES + 100 * 200, String(statSync(`${logFile}.1`).size));
    // The route's tail reads across the rotation (the last batch is now in the rotated log): the
    // newest lines, whole and in order.
    const tail = (await api('GET', `/deployments/chatty/logs?replica_id=${replicaId}`)).body.lines as string[];
    const shown = tail.filter((l) => l.includes(': line-')).map((l) => l.slice(l.indexOf('line-')));
    assert.ok(shown.length >= 100, `${shown.length} lines shown`);
    assert.deepEqual(
      shown,
      Array.from({ length: shown.length }, (_, i) => text(written - shown.length + i)),
    );
    assert.equal((await api('DELETE', '/deployments/chatty')).status, 200);
  });

  test('a launch racing a sweep gets its directory whole; what a crash left half built or half removed goes', async () => {
    const key = `test/host-files/${Date.now()}`;
    await p.blobs.put(key, Readable.from([Buffer.from('weights')]), { maxBytes: 1024 });
    const root = mkdtempSync(path.join(tmpdir(), 'gantry-host-files-'));
    try {
      const store = new VolumeStore(root, p.blobs);
      const files = [{ name: 'model.safetensors', blob_key: key }];
      const longAgo = new Date(Date.now() - 3_600_000);
      const aDayAgo = new Date(Date.now() - 25 * 3_600_000);
      (await store.materialize('rev', 1, files)).release();
      const outcomes = { claimedFirst: 0, sweptFirst: 0 };
      for (let i = 0; i < 40; i++) {
        const dir = path.join(root, 'rev', 'v1');
        if (existsSync(dir)) utimesSync(dir, longAgo, longAgo); // unused for an hour
        // Every other round the launch begins first, and its claim decides first; in the others it
        // comes a moment after the sweep began (0-2 ms), when the sweep mostly decides first. Left to
        // timers alone, a loaded machine had the sweep decide first in all 40 rounds.
        const launch = () => store.materialize('rev', 1, files);
        const [given, swept] =
          i % 2
            ? await Promise.all([launch(), store.sweep(new Set(), 60_000)])
            : await Promise.all([
                new Promise((r) => setTimeout(r, (i / 2) % 3)).then(launch),
                store.sweep(new Set(), 60_000),
              ]);
        outcomes[swept.includes(dir) ? 'sweptFirst' : 'claimedFirst']++;
        assert.equal(readFileSync(path.join(given.dir, 'model.safetensors'), 'utf8'), 'weights', `round ${i}`);
        // Pinned until released: a sweep with no keep time at all leaves it, then takes it.
        assert.deepEqual(await store.sweep(new Set(), 0), [], `round ${i}`);
        given.release();
      }
      assert.ok(outcomes.claimedFirst > 0 && outcomes.sweptFirst > 0, JSON.stringify(outcomes));

      // Leftovers: a build and a removal a crash cut short a day ago (a build on another host may
      // stream one large file for hours); a build of an hour ago, and one of a moment ago.
      const leftovers = ['v2.partial-0a1b2c3d4e5f', 'v3.removing-0a1b2c3d4e5f'].map((n) => path.join(root, 'rev', n));
      for (const d of leftovers) {
        mkdirSync(path.join(d, 'sub'), { recursive: true });
        utimesSync(d, aDayAgo, aDayAgo);
      }
      const hourOld = path.join(root, 'rev', 'v4.partial-0a1b2c3d4e5f');
      mkdirSync(hourOld);
      utimesSync(hourOld, longAgo, longAgo);
      const recent = path.join(root, 'rev', 'v5.partial-0a1b2c3d4e5f');
      mkdirSync(recent);
      await store.sweep(new Set([realpathSync(path.join(root, 'rev', 'v1'))]), 60_000);
      assert.deepEqual(
        [...leftovers, hourOld, recent].map((d) => existsSync(d)),
        [false, false, true, true],
      );
      assert.ok(existsSync(path.join(root, 'rev', 'v1')), 'mounted: kept');
    } finally {
      rmSync(root, { recursive: true, force: true });
      await p.blobs.delete(key);
    }
  });
});
