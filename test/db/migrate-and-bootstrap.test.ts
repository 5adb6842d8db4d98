import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { findPrincipalByApiKey } from '../../db/accounts';
import { bootstrapDefaultAccount } from '../../db/bootstrap';
import { migrate, MIGRATIONS_DIR, readMigrations } from '../../db/migrate';
import { withScratchDatabase } from '../helpers/scratch-database';

describe('migrations', () => {
  test('apply once, in order, and are recorded', async () => {
    await withScratchDatabase(async (db) => {
      const names = readMigrations().map((m) => m.name);
      assert.deepEqual(await migrate(db), names);
      assert.deepEqual(await migrate(db), [], 'a second run applies nothing');
      const { rows } = await db.query('SELECT version, name FROM schema_migrations ORDER BY version');
      assert.deepEqual(
        rows.map((r) => r.name),
        names,
      );
    });
  });

  test('concurrent starts apply each migration exactly once', async () => {
    await withScratchDatabase(async (db) => {
      const results = await Promise.all([migrate(db), migrate(db)]);
      const applied = results.flat();
      assert.deepEqual(
        applied.sort(),
        readMigrations()
          .map((m) => m.name)
          .sort(),
      );
    });
  });

  test('an applied migration that was edited afterwards is refused', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'gantry-migrations-'));
    try {
      cpSync(MIGRATIONS_DIR, dir, { recursive: true });
      await withScratchDatabase(async (db) => {
        await migrate(db, dir);
        const first = readMigrations(dir)[0];
        writeFileSync(path.join(dir, `${first.name}.sql`), first.sql + '\n-- edited\n');
        await assert.rejects(migrate(db, dir), /changed after it ran/);
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a failing migration leaves no trace and names itself', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'gantry-migrations-'));
    try {
      cpSync(MIGRATIONS_DIR, dir, { recursive: true });
      writeFileSync(path.join(dir, '999_broken.sql'), 'CREATE TABLE half_done (id int);\nSELECT no_such_function();\n');
      await withScratchDatabase(async (db) => {
        await assert.rejects(migrate(db, dir), /Migration 999_broken failed/);
        const { rowCount } = await db.query("SELECT 1 FROM information_schema.tables WHERE table_name = 'half_done'");
        assert.equal(rowCount, 0);
        const recorded = await db.query('SELECT 1 FROM schema_migrations WHERE version = 999');
        assert.equal(recorded.rowCount, 0);
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('first-start bootstrap', () => {
  test('creates the default organization, project and an admin key once', async () => {
    await withScratchDatabase(async (db) => {
      await migrate(db);
      const created = await bootstrapDefaultAccount(db);
      assert.ok(created);
      assert.match(created.apiKey, /^gantry_[A-Za-z0-9_-]{43}$/);
      assert.equal(await bootstrapDefaultAccount(db), null, 'second start creates nothing');

      const principal = await findPrincipalByApiKey(db, created.apiKey);
      assert.equal(principal?.projectSlug, 'default');
      assert.equal(principal?.projectRole, 'Admin');
      assert.equal(principal?.organizationRole, 'Admin');
      assert.equal(principal?.isPlatformAdmin, true);

      // Only a hash is stored: the secret is nowhere in the table.
      const { rows } = await db.query('SELECT * FROM api_keys');
      assert.equal(rows.length, 1);
      assert.ok(!JSON.stringify(rows).includes(created.apiKey.slice(7)));
    });
  });
});
