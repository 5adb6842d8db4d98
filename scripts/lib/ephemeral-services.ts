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
import { ensureSearchAttributes } from '../../platform/temporal';
import { startEmbeddedPostgres } from '../../db/embedded';
import { migrate } from '../../db/migrate';
import { createPool } from '../../db/pool';
import { freePort } from '../../platform/ports';
import { ensureTemporalCli } from './temporal-cli';
import { startTemporalDevServer } from './temporal-dev-server';

export interface EphemeralServices {
  temporalAddress: string;
  databaseUrl: string;
  temporalCli: string;
  /**
   * Places that share nothing but the two servers, one per `lanes` asked for: a Temporal namespace
   * and a migrated database each. The first is `default` and `databaseUrl`.
   */
  lanes: Array<{ namespace: string; databaseUrl: string }>;
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
export async function startEphemeralServices(
  work: string,
  log: (line: string) => void,
  opts: { lanes?: number } = {},
): Promise<EphemeralServices> {
  const cli = await ensureTemporalCli({ configured: process.env.TEMPORAL_CLI, log });
  const extraNamespaces = Array.from({ length: Math.max(0, (opts.lanes ?? 1) - 1) }, (_, i) => `lane${i + 1}`);
  const [temporal, database] = await Promise.all([
    startTemporalDevServer({
      cli,
      port: await freePort(),
      headless: true,
      httpPort: await freePort(),
      metricsPort: await freePort(),
      extraNamespaces,
      log: () => undefined,
    }),
    provisionDatabase(work),
  ]);
  const laneDrops: Array<() => Promise<void>> = [];
  const stop = async () => {
    await temporal.stop().catch((e) => log(`stopping Temporal: ${(e as Error).message}`));
    for (const drop of laneDrops) await drop().catch(() => undefined);
    await database.teardown().catch((e) => log(`stopping PostgreSQL: ${(e as Error).message}`));
  };
  const lanes = [{ namespace: 'default', databaseUrl: database.url }];
  try {
    for (const namespace of extraNamespaces) {
      const { url, drop } = await createThrowawayDatabase(database.url, `gantry_${namespace}`);
      laneDrops.push(drop);
      lanes.push({ namespace, databaseUrl: url });
    }
    const connection = await Connection.connect({ address: temporal.address });
    for (const lane of lanes) {
      const db = createPool(lane.databaseUrl);
      await migrate(db);
      await db.end();
      await ensureSearchAttributes(connection, lane.namespace);
    }
    await connection.close();
  } catch (err) {
    await stop();
    throw err;
  }
  return { temporalAddress: temporal.address, databaseUrl: database.url, temporalCli: cli, lanes, stop };
}
