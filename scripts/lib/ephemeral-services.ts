/**
 * Throwaway Temporal and PostgreSQL for tests and benchmarks: a Temporal dev
 * server on free ports with history in memory, and embedded PostgreSQL in a
 * temporary directory (or a fresh database on DATABASE_URL's server, dropped
 * at the end). Both are real servers; nothing here is a stand-in.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import { Connection } from '@temporalio/client';
import { ensureSearchAttributes } from '../../common/temporal';
import { startEmbeddedPostgres } from '../../db/embedded';
import { migrate } from '../../db/migrate';
import { createPool } from '../../db/pool';
import { freePort } from './ports';
import { ensureTemporalCli } from './temporal-cli';
import { startTemporalDevServer } from './temporal-dev-server';

export interface EphemeralServices {
  temporalAddress: string;
  databaseUrl: string;
  temporalCli: string;
  stop(): Promise<void>;
}

/** A new, empty database on the server of `serverUrl`, and a way to drop it. */
export async function createThrowawayDatabase(
  serverUrl: string,
  prefix = 'gantry_tmp',
): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  const run = async (sql: string) => {
    const c = new pg.Client({ connectionString: serverUrl });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await run(`CREATE DATABASE ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => run(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

async function provisionDatabase(work: string): Promise<{ url: string; teardown: () => Promise<void> }> {
  // On a given server: a throwaway database, so runs never touch real data.
  if (process.env.DATABASE_URL) {
    const { url, drop } = await createThrowawayDatabase(process.env.DATABASE_URL);
    return { url, teardown: drop };
  }
  const handle = await startEmbeddedPostgres({
    dir: path.join(work, 'postgres'),
    port: await freePort(),
    persistent: false,
  });
  return { url: handle.url, teardown: () => handle.stop() };
}

/** `work` is a scratch directory the caller owns (and removes). */
export async function startEphemeralServices(work: string, log: (line: string) => void): Promise<EphemeralServices> {
  const cli = await ensureTemporalCli({ configured: process.env.TEMPORAL_CLI, log });
  const [temporal, database] = await Promise.all([
    startTemporalDevServer({
      cli,
      port: await freePort(),
      headless: true,
      httpPort: await freePort(),
      metricsPort: await freePort(),
      log: () => undefined,
    }),
    provisionDatabase(work),
  ]);
  const stop = async () => {
    await temporal.stop().catch((e) => log(`stopping Temporal: ${(e as Error).message}`));
    await database.teardown().catch((e) => log(`stopping PostgreSQL: ${(e as Error).message}`));
  };
  try {
    const db = createPool(database.url);
    await migrate(db);
    await db.end();
    const connection = await Connection.connect({ address: temporal.address });
    await ensureSearchAttributes(connection, 'default');
    await connection.close();
  } catch (err) {
    await stop();
    throw err;
  }
  return { temporalAddress: temporal.address, databaseUrl: database.url, temporalCli: cli, stop };
}
