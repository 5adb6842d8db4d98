/**
 * A replica's log belongs to the owner of the log directory, privately (0600 in a 0700
 * directory): on docker-compose the container host runs as root and the API, which reads the
 * logs, as `node`, owner of the shared log volume. A root host hands each log to that owner; a
 * log directory of root's own stays root's.
 */
import assert from 'node:assert/strict';
import { chownSync, closeSync, mkdtempSync, readFileSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { ownerOnlyFiles } from '../../platform/lifecycle';
import {
  openReplicaLog,
  replicaLogFile,
  rotateReplicaLog,
  rotatedLogFile,
} from '../../providers/containers/replica-log';

ownerOnlyFiles();
const isRoot = process.getuid?.() === 0;

function logIn(logDir: string): { file: string; dir: string } {
  const file = replicaLogFile(logDir, 'dep-1', 'dep-1-1');
  const fd = openReplicaLog(logDir, file);
  writeSync(fd, 'listening\n');
  closeSync(fd);
  return { file, dir: path.dirname(file) };
}

const owner = (p: string) => {
  const s = statSync(p);
  return { uid: s.uid, gid: s.gid, mode: s.mode & 0o777 };
};

test("a replica's log goes to the log directory's owner, readable by it alone", async () => {
  const logDir = mkdtempSync(path.join(tmpdir(), 'gantry-logs-'));
  // The API's user on compose (node, 1000); as another user than root, that user itself.
  const api = isRoot ? { uid: 1000, gid: 1000 } : { uid: process.getuid!(), gid: process.getgid!() };
  if (isRoot) chownSync(logDir, api.uid, api.gid);
  const { file, dir } = logIn(logDir);
  assert.deepEqual(owner(file), { ...api, mode: 0o600 });
  assert.deepEqual(owner(dir), { ...api, mode: 0o700 });

  // Opened again (a relaunch appends): still the owner's, the earlier output kept.
  const again = logIn(logDir);
  assert.deepEqual(owner(again.file), { ...api, mode: 0o600 });
  assert.equal(statSync(again.file).size, 'listening\n'.length * 2);

  // Rotated past its limit: the log before is the owner's too, as private, and the log starts again.
  assert.equal(await rotateReplicaLog(logDir, file, 8), true);
  assert.deepEqual(owner(rotatedLogFile(file)), { ...api, mode: 0o600 });
  assert.equal(readFileSync(rotatedLogFile(file), 'utf8'), 'listening\n'.repeat(2));
  assert.deepEqual({ ...owner(file), size: statSync(file).size }, { ...api, mode: 0o600, size: 0 });
  assert.equal(await rotateReplicaLog(logDir, file, 8), false, 'under its limit: left alone');
});

test('a log directory of the host user itself keeps its logs that user’s', () => {
  const logDir = mkdtempSync(path.join(tmpdir(), 'gantry-logs-'));
  const { file, dir } = logIn(logDir);
  const me = { uid: process.getuid!(), gid: process.getgid!() };
  assert.deepEqual(owner(file), { ...me, mode: 0o600 });
  assert.deepEqual(owner(dir), { ...me, mode: 0o700 });
});
