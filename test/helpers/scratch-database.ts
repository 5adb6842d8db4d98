/** A fresh, empty database on the test server, for tests that need a clean slate. */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createPool, type Db } from '../../db/pool';

export async function withScratchDatabase<T>(fn: (db: Db) => Promise<T>): Promise<T> {
  const base = process.env.DATABASE_URL;
  if (!base) throw new Error('DATABASE_URL is not set: run the tests with ./dev test');
  const name = `gantry_scratch_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(base);
  url.pathname = `/${name}`;
  const db = createPool(url.toString(), 2);
  try {
    return await fn(db);
  } finally {
    await db.end();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}
