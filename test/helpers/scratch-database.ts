/** A fresh, empty database on the test server, for tests that need a clean slate. */
import pg from 'pg';
import { createPool, type Db } from '../../db/pool';
import { createThrowawayDatabase } from '../../scripts/lib/ephemeral-services';

export async function withScratchDatabase<T>(fn: (db: Db) => Promise<T>): Promise<T> {
  const base = process.env.DATABASE_URL;
  if (!base) throw new Error('DATABASE_URL is not set: run the tests with ./dev test');
  const { url, drop } = await createThrowawayDatabase(base, 'gantry_scratch');
  const db = createPool(url, 2);
  try {
    return await fn(db);
  } finally {
    await db.end();
    await drop();
  }
}

/**
 * Resolves once some session of `db`'s database waits for a lock, or once `done()` holds: evidence,
 * not a pause, that a statement is held up behind another transaction (or that it was not, and
 * finished). Asks pg_locks on a connection of its own, since the pool's may all be taken.
 */
export async function lockWaitOrDone(db: Db, done: () => boolean, timeoutMs = 10_000): Promise<void> {
  const client = new pg.Client({ connectionString: db.options.connectionString });
  await client.connect();
  try {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      const { rows } = await client.query<{ n: number }>(
        // By the waiting session's database: a row lock's wait (on a transaction id) names none itself.
        `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
          WHERE NOT l.granted AND a.datname = current_database()`,
      );
      if (rows[0]!.n > 0) return;
      if (Date.now() > deadline) throw new Error(`no lock wait and not done within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    await client.end();
  }
}
