/**
 * The embedded PostgreSQL of `./dev up` starts under Gantry's own file mode
 * policy (umask 077, set by every entry point): as root it runs initdb and the
 * server as the `postgres` user, which must still read what is written for it,
 * and reach its binaries and data: where it cannot, the start stops with what to do.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import pg from 'pg';

import { ownerOnlyFiles } from '../../platform/lifecycle';
import { assertPostgresUserCanReach, startEmbeddedPostgres } from '../../db/embedded';
import { freePort } from '../../platform/ports';

const parent = mkdtempSync(path.join(tmpdir(), 'gantry-embedded-pg-'));
after(() => rmSync(parent, { recursive: true, force: true }));

test('a fresh embedded PostgreSQL starts and answers under umask 077', async () => {
  const previous = process.umask();
  ownerOnlyFiles();
  try {
    const db = await startEmbeddedPostgres({ dir: path.join(parent, 'pg'), port: await freePort(), persistent: false });
    try {
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      const { rows } = await client.query<{ answer: number }>('SELECT 6 * 7 AS answer');
      await client.end();
      assert.equal(rows[0].answer, 42);
    } finally {
      await db.stop();
    }
    assert.equal(process.umask(), 0o077, 'the umask is Gantry’s again once PostgreSQL runs');
  } finally {
    process.umask(previous);
  }
});

test('a checkout the postgres user cannot reach (under a 0700 home) stops at once, saying what to do', async () => {
  const home = path.join(parent, 'home');
  mkdirSync(path.join(home, 'gantry', '.data'), { recursive: true });
  // Passable below the home whatever the umask of whoever runs the tests (077 made them 0700 too).
  for (const dir of [path.join(home, 'gantry'), path.join(home, 'gantry', '.data')]) chmodSync(dir, 0o755);
  chmodSync(home, 0o700);
  const dir = path.join(home, 'gantry', '.data', 'postgres');
  assert.throws(
    () => assertPostgresUserCanReach([dir]),
    (err: Error) =>
      err.message.includes(`cannot enter ${home} (mode 700)`) &&
      err.message.includes('/opt/gantry') &&
      err.message.includes(`chmod o+x ${home}`) &&
      err.message.includes('DATABASE_URL'),
  );
  chmodSync(home, 0o711);
  assert.doesNotThrow(() => assertPostgresUserCanReach([dir]), 'passable once others may pass through');
});
