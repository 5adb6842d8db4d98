/**
 * The embedded PostgreSQL of `./dev up` starts under Gantry's own file mode
 * policy (umask 077, set by every entry point): as root it runs initdb and the
 * server as the `postgres` user, which must still read what is written for it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import pg from 'pg';

import { ownerOnlyFiles } from '../../common/lifecycle';
import { startEmbeddedPostgres } from '../../db/embedded';
import { freePort } from '../../providers/containers/replica-health';

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
