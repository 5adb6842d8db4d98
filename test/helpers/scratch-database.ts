/** A fresh, empty database on the test server, for tests that need a clean slate. */
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
