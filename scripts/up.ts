/**
 * `./dev up`: the whole platform on one machine.
 *
 *   Temporal dev server (SQLite under .data/, UI)   unless TEMPORAL_ADDRESS is set
 *   embedded PostgreSQL under .data/postgres       unless DATABASE_URL is set
 *   API, inference gateway, control worker, GPU worker (simulated host here)
 *
 * Ctrl-C (or SIGTERM) stops the Gantry processes first, letting workers hand
 * in-flight activities back to Temporal, then Temporal and PostgreSQL.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { loadConfig } from '../platform/config';
import { writeSecretFile } from '../platform/secret-file';
import { ensureSearchAttributes, temporalConnectionOptions } from '../platform/temporal';
import { bootstrapDefaultAccount } from '../db/bootstrap';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from '../db/embedded';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import { ensureTemporalCli } from './lib/temporal-cli';
import { isPortFree } from '../platform/ports';
import { startTemporalDevServer, type TemporalDevServer } from './lib/temporal-dev-server';
import { ownerOnlyFiles } from '../platform/lifecycle';
import { PodmanEngine } from '../providers/containers/podman/podman-engine';
import { buildModelServerImage, TORCH_SERVER_IMAGE } from './build-model-server-image';
import { NODE_TYPESCRIPT_ARGS } from '../platform/node-typescript';

const ROOT = path.resolve(__dirname, '..');
const say = (line: string) => process.stderr.write(`[gantry] ${line}\n`);

/** Each process, and its Prometheus metrics port: GANTRY_METRICS_BASE_PORT (9464) plus its offset. */
const PROCESSES = [
  { name: 'api', entry: 'api/server.ts', metrics: 0 },
  { name: 'gateway', entry: 'gateway/server.ts', metrics: 1 },
  { name: 'worker-control', entry: 'workers/control.ts', metrics: 2 },
  { name: 'worker-gpu', entry: 'workers/gpu.ts', metrics: 3 },
  { name: 'worker-speech', entry: 'workers/speech.ts', metrics: 4 },
];
const METRICS_BASE_PORT = Number(process.env.GANTRY_METRICS_BASE_PORT ?? 9464);

async function requireFreePort(port: number, what: string, envVar: string) {
  if (!(await isPortFree(port))) {
    throw new Error(`Port ${port} for ${what} is in use. Stop what holds it, or set ${envVar} to another port.`);
  }
}

async function main() {
  ownerOnlyFiles(); // and the PostgreSQL, Temporal and Gantry processes it starts
  const config = loadConfig();
  mkdirSync(config.dataDir, { recursive: true });
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    GANTRY_DATA_DIR: config.dataDir,
    // Deployments' replicas run as isolated containers (rootful Podman, installed by ./dev up);
    // GANTRY_CONTAINER_RUNTIME=process is the single-tenant alternative: it starts only with
    // GANTRY_SINGLE_TENANT=yes, and runs one project.
    GANTRY_CONTAINER_RUNTIME: process.env.GANTRY_CONTAINER_RUNTIME ?? 'podman',
  };
  if (!config.keyring) {
    // One key for pre-signed URLs, kept across restarts so issued URLs stay valid.
    const secretFile = path.join(config.dataDir, 'signing-secret');
    if (!existsSync(secretFile)) writeSecretFile(secretFile, randomBytes(32).toString('hex'));
    env.GANTRY_SIGNING_SECRET = readFileSync(secretFile, 'utf8').trim();
  }
  let postgres: EmbeddedPostgresHandle | null = null;
  let temporal: TemporalDevServer | null = null;
  const children = new Map<string, ChildProcess>();
  let shuttingDown = false;

  const shutdown = async (code: number) => {
    if (shuttingDown) return;
    shuttingDown = true;
    say('stopping Gantry processes...');
    await Promise.all(
      [...children.values()].map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) return resolve();
            const timer = setTimeout(() => c.kill('SIGKILL'), 30_000);
            c.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
            c.kill('SIGTERM');
          }),
      ),
    );
    if (temporal) {
      say('stopping Temporal...');
      await temporal.stop();
    }
    if (postgres) {
      say('stopping PostgreSQL...');
      await postgres.stop();
    }
    say('stopped.');
    process.exit(code);
  };
  process.on('SIGINT', () => void shutdown(0));
  process.on('SIGTERM', () => void shutdown(0));

  try {
    await requireFreePort(config.apiPort, 'the API', 'GANTRY_API_PORT');
    await requireFreePort(config.gatewayPort, 'the inference gateway', 'GANTRY_GATEWAY_PORT');

    if (!config.databaseUrl) {
      await requireFreePort(config.postgresPort, 'PostgreSQL', 'GANTRY_POSTGRES_PORT');
      say(`starting embedded PostgreSQL on 127.0.0.1:${config.postgresPort} (data in ${config.dataDir}/postgres)`);
      postgres = await startEmbeddedPostgres({
        dir: path.join(config.dataDir, 'postgres'),
        port: config.postgresPort,
        persistent: true,
      });
      env.DATABASE_URL = postgres.url;
    }

    if (!config.externalTemporal) {
      await requireFreePort(config.temporalPort, 'Temporal', 'GANTRY_TEMPORAL_PORT');
      await requireFreePort(config.temporalUiPort, 'the Temporal UI', 'GANTRY_TEMPORAL_UI_PORT');
      const cli = await ensureTemporalCli({ configured: config.temporalCli, log: say });
      say(`starting Temporal dev server on ${config.temporal.address} (history in ${config.dataDir}/temporal.sqlite)`);
      temporal = await startTemporalDevServer({
        cli,
        port: config.temporalPort,
        uiPort: config.temporalUiPort,
        dbFile: path.join(config.dataDir, 'temporal.sqlite'),
        log: (line) => say(`temporal: ${line}`),
      });
      env.TEMPORAL_ADDRESS = temporal.address;
    }

    if (env.GANTRY_CONTAINER_RUNTIME === 'podman' && !env.GANTRY_MODEL_SERVER_IMAGE) {
      // Endpoints' model servers run from an image on this runtime: built from this machine's
      // trainer environment the first time (a minute or so), then found by its content's tag.
      say('building the model server image (first start, or after the trainer changed)...');
      env.GANTRY_MODEL_SERVER_IMAGE = await buildModelServerImage(
        new PodmanEngine(path.join(config.dataDir, 'podman'), { storageGiB: config.containerStorageGiB }),
      );
      say(`model server image ${env.GANTRY_MODEL_SERVER_IMAGE}`);
    }
    if (
      env.GANTRY_CONTAINER_RUNTIME === 'podman' &&
      !env.GANTRY_TORCH_MODEL_SERVER_IMAGE &&
      existsSync(path.join(TORCH_SERVER_IMAGE.venv, 'bin/python'))
    ) {
      // The PyTorch model server's (SmolLM2 endpoints): some 4.6 GB, a few minutes the first time.
      say('building the PyTorch model server image (first start, or after its code changed)...');
      env.GANTRY_TORCH_MODEL_SERVER_IMAGE = await buildModelServerImage(
        new PodmanEngine(path.join(config.dataDir, 'podman'), { storageGiB: config.containerStorageGiB }),
        TORCH_SERVER_IMAGE,
      );
      say(`PyTorch model server image ${env.GANTRY_TORCH_MODEL_SERVER_IMAGE}`);
    }

    const db = createPool(env.DATABASE_URL!);
    const applied = await migrate(db);
    if (applied.length) say(`migrations applied: ${applied.join(', ')}`);
    const created = await bootstrapDefaultAccount(db);
    await db.end();
    const keyFile = config.adminKeyFile;
    if (created) {
      writeSecretFile(keyFile, created.apiKey);
      // Printed once, to the terminal only (not through the log pipeline).
      process.stderr.write(
        `\n  First start: created the default organization, project 'default' and an admin API key:\n\n` +
          `      ${created.apiKey}\n\n  It is also in ${keyFile} (readable only by you). It will not be shown again.\n\n`,
      );
    }

    const connection = await Connection.connect(
      temporalConnectionOptions({ ...config.temporal, address: env.TEMPORAL_ADDRESS ?? config.temporal.address }),
    );
    const registered = await ensureSearchAttributes(connection, config.temporal.namespace);
    if (registered.length) say(`registered search attributes: ${registered.join(', ')}`);
    await connection.close();

    for (const p of PROCESSES) {
      const child = spawn(process.execPath, [...NODE_TYPESCRIPT_ARGS, path.join(ROOT, p.entry)], {
        cwd: ROOT,
        env: { ...env, GANTRY_METRICS_PORT: String(METRICS_BASE_PORT + p.metrics) },
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      children.set(p.name, child);
      child.on('exit', (code, signal) => {
        if (shuttingDown) return;
        say(`${p.name} exited unexpectedly (${signal ?? `code ${code}`}); stopping the platform.`);
        void shutdown(1);
      });
    }

    const apiUrl = `http://${config.host}:${config.apiPort}`;
    const deadline = Date.now() + 120_000;
    while (
      !(await fetch(`${apiUrl}/healthz`)
        .then((r) => r.ok)
        .catch(() => false))
    ) {
      if (shuttingDown) return;
      if (Date.now() > deadline) throw new Error('the API did not become ready within 120s');
      await new Promise((r) => setTimeout(r, 300));
    }
    say('ready:');
    say(`  API               ${apiUrl}/v1   (docs: ${apiUrl}/v1/docs)`);
    say(`  inference gateway http://${config.host}:${config.gatewayPort}/v1`);
    say(
      `  Temporal          ${env.TEMPORAL_ADDRESS ?? config.temporal.address} namespace ${config.temporal.namespace}`,
    );
    if (temporal?.uiUrl) say(`  Temporal UI       ${temporal.uiUrl}`);
    say(
      `  metrics           http://${config.host}:${METRICS_BASE_PORT}-${METRICS_BASE_PORT + PROCESSES.length - 1}/metrics (${PROCESSES.map((p) => p.name).join(', ')})`,
    );
    say(`  admin API key     ${keyFile}`);
    say(`  try: curl -H "Authorization: Bearer $(cat ${path.relative(process.cwd(), keyFile)})" ${apiUrl}/v1/whoami`);
  } catch (err) {
    say(`failed to start: ${(err as Error).message}`);
    await shutdown(1);
  }
}

void main();
