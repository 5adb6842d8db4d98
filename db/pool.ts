import pg from 'pg';

export type Db = pg.Pool;

export function createPool(connectionString: string, max = 10): Db {
  const pool = new pg.Pool({ connectionString, max });
  // An idle client that loses its connection (server restart) must not crash the process.
  pool.on('error', () => undefined);
  return pool;
}

/** Runs fn inside a transaction on one client; rolls back on any error. */
export async function withTransaction<T>(db: Db, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await db.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

/** A result column list that names no column: `*`, `RETURNING *`, `(composite).*`. */
const ALL_COLUMNS = /(\bSELECT\s+(DISTINCT\s+)?|\bRETURNING\s+|,\s*|\.)\*/i;

/**
 * A statement on a hot path (a queue submit, claim or report), as a named prepared statement:
 * PostgreSQL parses and plans it once per connection instead of on every call. For the queue's
 * submit, a join and an INSERT, that planning was a third of the database's time per job (on the
 * SQL alone, 8 clients: 4,400 -> 7,000 submits a second).
 *
 * Its result columns are named, never `*`: a prepared plan whose result columns change fails
 * every later call on its connection ("cached plan must not change result type"), so a `*` would
 * turn a migration that adds a column, run by a newer process, into errors in the running ones.
 * Behind a connection pooler, it needs one that keeps prepared statements per client (PgBouncer
 * 1.21 and later, max_prepared_statements).
 */
export function preparedStatement(name: string, text: string): (values: unknown[]) => pg.QueryConfig {
  if (ALL_COLUMNS.test(text)) throw new Error(`prepared statement ${name}: name its result columns instead of *`);
  return (values) => ({ name, text, values });
}
