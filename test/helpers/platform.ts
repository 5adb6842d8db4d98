/**
 * A whole Gantry in the test process: the real API app on an ephemeral port,
 * real control and GPU workers, against the Temporal server and PostgreSQL
 * that test/run.ts started (DATABASE_URL, TEMPORAL_ADDRESS).
 */
import { createServer } from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, type Worker } from '@temporalio/worker';
import { createApp, registeredRoutes, dispatchedRoutes } from '../../api/app';
import { ensureServerlessPools } from '../../api/serverless-pools';
import { closeGracefully } from '../../api/listen';
import type { RegisteredRoute } from '../../api/route';
import { createGatewayHandler } from '../../gateway/app';
import { loadConfig, requireDatabaseUrl, type GantryConfig } from '../../platform/config';
import type { GpuType } from '../../shared/gpu-types';
import { createLogger } from '../../platform/logger';
import { ownerOnlyFiles } from '../../platform/lifecycle';
import { temporalConnectionOptions } from '../../platform/temporal';
import { createPool, type Db } from '../../db/pool';
import { QueueWakeups } from '../../db/queue-wakeups';
import { SimulatedHost } from '../../providers/accelerator/host';
import type { BlobStore } from '../../providers/storage/blob-store';
import { LocalFleet } from '../../providers/compute/local-fleet';
import { FilesystemBlobStore } from '../../providers/storage/filesystem';
import {
  createContainerWorkers,
  createControlWorker,
  createGpuWorkers,
  createSpeechWorkers,
} from '../../workers/runtime';
import { selectContainerRuntime } from '../../providers/containers/select-runtime';
import { hostFileStores } from '../../workers/container-host-workers';
import { startBlobDeletionRetries } from '../../providers/storage/blob-deletions';
import { startHostHousekeeping, type HostHousekeeping } from '../../providers/containers/host-housekeeping';
import { PrincipalCache } from '../../db/principal-cache';
import { freePort } from '../../platform/ports';

let runtimeInstalled = false;

/** Every log line the API wrote during the test, as text (to check what is, and is not, logged). */
export class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void) {
    this.lines.push(chunk.toString('utf8'));
    done();
  }
  text() {
    return this.lines.join('');
  }
}

export interface TestPlatform {
  baseUrl: string;
  /** The inference gateway (proxy to container deployments). */
  gatewayUrl: string;
  config: GantryConfig;
  db: Db;
  temporal: Client;
  blobs: BlobStore;
  logs: LogCapture;
  /** The API's claim long-poll waits (how many claims wait on a queue). */
  queueWakeups: QueueWakeups;
  /** Every route the API registered, as its router lists them. */
  routes: RegisteredRoute[];
  /** What the API's Express routers answer (read from their own tables, not from the document's list). */
  dispatched: Array<{ method: string; path: string }>;
  /** The container host's keeping of its disk: file sweeps and log rotation (started, as in production). */
  housekeeping: HostHousekeeping;
  stop(): Promise<void>;
}

export async function startTestPlatform(
  opts: {
    gpuTypes?: GpuType[];
    queueWaitSeconds?: number;
    env?: Record<string, string>;
    /** false: no in-process control worker (a test runs real worker processes instead). */
    controlWorker?: boolean;
    /**
     * false: no container host (deployments find no worker on queue `containers`). true: one even
     * without the in-process control worker (a test that runs and kills real control workers).
     */
    containers?: boolean;
    /** true: a speech host (queue `speech`) with the speech environment `./dev test` installs, and no model directory. */
    speech?: boolean;
    /**
     * The container host's runtime: `process` (the default here: most deployment tests run the
     * example server straight from the repository) or `podman` (images, isolated). The process
     * runtime's host is declared single-tenant (GANTRY_SINGLE_TENANT=yes, without which it does not
     * start), so it runs one project's replicas: the first project that deploys. The API is told
     * so only through `env`, as other tests create projects.
     */
    containerRuntime?: 'process' | 'podman';
    /** Wraps the blob store every part of the platform uses (a test that makes storage fail). */
    wrapBlobs?: (store: BlobStore) => BlobStore;
    /** true: the API's start makes the platform's serverless pools, as api/server.ts does. */
    serverless?: boolean;
  } = {},
): Promise<TestPlatform> {
  // The file modes every Gantry process has (0600/0700): what its workers write here is as
  // private as in production, so a reader of another user (a container's) meets the same modes.
  ownerOnlyFiles();
  const base = loadConfig({
    ...process.env,
    GANTRY_GPU_QUEUE_WAIT_SECONDS: String(opts.queueWaitSeconds ?? 3),
    GANTRY_WORKER_SHUTDOWN_GRACE_SECONDS: '2',
    ...opts.env,
  });
  if (!runtimeInstalled) {
    Runtime.install({ logger: new DefaultLogger('WARN') });
    runtimeInstalled = true;
  }
  // Listen first: pre-signed URLs must name the port this API really serves.
  const server = createServer();
  const closeServer = closeGracefully(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // The gateway too: the control worker's batches call models there.
  const gateway = createServer();
  await new Promise<void>((resolve) => gateway.listen(0, '127.0.0.1', resolve));
  const gatewayUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
  const config: GantryConfig = { ...base, publicUrl: baseUrl, gatewayUrl };
  const disk = new FilesystemBlobStore(config.blobDir);
  const blobs = opts.wrapBlobs ? opts.wrapBlobs(disk) : disk;
  const db = createPool(requireDatabaseUrl(config));
  const connection = await Connection.connect(temporalConnectionOptions(config.temporal));
  const temporal = new Client({ connection, namespace: config.temporal.namespace });
  const native = await NativeConnection.connect(temporalConnectionOptions(config.temporal));
  const fleet = new LocalFleet(db, base.fleetStepMs);
  const common = { connection: native, namespace: config.temporal.namespace, shutdownGraceSeconds: 2 };
  const workers: Worker[] = [
    ...(opts.controlWorker === false
      ? []
      : [
          await createControlWorker({
            ...common,
            db,
            blobs,
            fleet,
            remoteFetch: config.remoteFetch,
            storageQuotaBytes: config.projectStorageQuotaBytes,
            keyring: config.keyring,
            modelCalls: { apiUrl: baseUrl, gatewayUrl },
            batchConcurrency: config.batchConcurrencyPerProject,
          }),
        ]),
    ...(await createGpuWorkers({
      ...common,
      gpuTypes: opts.gpuTypes ?? ['H100_SXM'],
      host: new SimulatedHost(),
      db,
      blobs,
      // The torch trainer too where ./dev set it up (GANTRY_TORCH_TRAINER_PYTHON): SmolLM2 jobs train here.
      trainers: {
        reference: base.trainerPython,
        ...(base.torchTrainerPython ? { torch: base.torchTrainerPython } : {}),
      },
      modelDir: base.modelDir,
      workDir: path.join(base.dataDir, 'trainer-runs'),
      trainerStallSeconds: base.trainerStallSeconds,
      trainingSlots: base.trainingSlots,
      fleet,
    })),
  ];
  const logs = new LogCapture();
  const hostLogger = createLogger('worker-control', 'warn', logs);
  const containerRuntime = (await selectContainerRuntime(
    { ...base, containerRuntime: opts.containerRuntime ?? 'process', singleTenant: true, replicaApiUrl: baseUrl },
    hostLogger,
  ))!;
  const stores = hostFileStores(base.dataDir, blobs);
  const housekeeping = startHostHousekeeping({
    runtime: containerRuntime,
    stores,
    db,
    config: base,
    logger: hostLogger,
  });
  if ((opts.controlWorker !== false || opts.containers === true) && opts.containers !== false) {
    workers.push(
      ...(await createContainerWorkers({
        ...common,
        db,
        runtime: containerRuntime,
        ...stores,
        keyring: base.keyring,
        replicaAdoptionSeconds: base.replicaAdoptionSeconds,
        modelDir: base.modelDir,
      })),
    );
  }
  if (opts.speech) {
    workers.push(
      ...(await createSpeechWorkers({
        ...common,
        blobs,
        speechPython: base.speechPython,
        slots: base.speechSlots,
        workDir: path.join(base.dataDir, 'speech'),
        remoteFetch: config.remoteFetch,
        operatorModels: [],
      })),
    );
  }
  const running = workers.map((w) => w.run());
  // As the control worker runs them.
  const blobDeletions = startBlobDeletionRetries({
    db,
    blobs,
    everySeconds: config.blobDeletionRetrySeconds,
    logger: hostLogger,
  });

  const logger = createLogger('api', 'info', logs);
  const principals = new PrincipalCache(db, requireDatabaseUrl(config), logger);
  await principals.start();
  const queueWakeups = new QueueWakeups(requireDatabaseUrl(config), logger);
  await queueWakeups.start();
  const app = createApp({ config, db, temporal, logger, blobs, principals, queueWakeups });
  server.on('request', app);
  if (opts.serverless) await ensureServerlessPools({ db, temporal, config, logger });
  gateway.on('request', createGatewayHandler({ config, db, logger, principals }));

  return {
    baseUrl,
    routes: registeredRoutes(app),
    dispatched: dispatchedRoutes(app),
    gatewayUrl,
    config,
    db,
    temporal,
    blobs,
    logs,
    queueWakeups,
    housekeeping,
    async stop() {
      // An unexpected error the API answered with a 500 is logged with its stack; the test output
      // keeps it, so a failure in CI can be traced to its cause. (5xx answers the API means, an
      // ApiError such as an injected fault or a 503 with Retry-After, are left out.)
      for (const line of logs.lines) {
        if (line.includes('"msg":"request failed"') && !line.includes('"type":"ApiError"'))
          process.stderr.write(`[api error log] ${line}`);
      }
      await endOpenRuns(temporal);
      await closeServer();
      gateway.closeAllConnections();
      await new Promise<void>((r) => gateway.close(() => r()));
      for (const w of workers) w.shutdown();
      await Promise.all(running);
      await housekeeping.stop();
      await blobDeletions.stop();
      await containerRuntime.stopAll();
      await principals.stop();
      await queueWakeups.stop();
      await native.close();
      await connection.close();
      await db.end();
    },
  };
}

/**
 * Terminates every run still open in the client's namespace. What a file left running (a
 * deployment, an endpoint, a cluster) would be picked up by the next file's workers, which poll
 * the same queues; each lane of test/run.ts runs one file at a time in a namespace of its own, so
 * every open run in it is this file's.
 */
export async function endOpenRuns(temporal: Client): Promise<void> {
  for await (const w of temporal.workflow.list({ query: 'ExecutionStatus = "Running"' })) {
    await temporal.workflow
      .getHandle(w.workflowId, w.runId)
      .terminate('the test file finished')
      .catch(() => undefined); // it ended meanwhile
  }
}

export interface HttpResult<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

export async function call<T = any>(
  baseUrl: string,
  method: string,
  path: string,
  opts: { key?: string; json?: unknown; body?: string | Buffer | FormData; headers?: Record<string, string> } = {},
): Promise<HttpResult<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key) headers.authorization = `Bearer ${opts.key}`;
  let body: string | Buffer | FormData | undefined = opts.body;
  if (opts.json !== undefined) {
    body = JSON.stringify(opts.json);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(baseUrl + path, { method, headers, body, redirect: 'manual' });
  const text = await res.text();
  let parsed: unknown = text;
  if ((res.headers.get('content-type') ?? '').includes('json')) parsed = JSON.parse(text);
  return { status: res.status, body: parsed as T, headers: res.headers };
}

/** Polls `fn` until `done` holds for its result, or fails after `timeoutMs`. */
export async function eventually<T>(
  fn: () => Promise<T>,
  done: (v: T) => boolean,
  timeoutMs = 30_000,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (done(v)) return v;
    if (Date.now() > deadline)
      throw new Error(`condition not met within ${timeoutMs}ms; last value: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Uploads a fine-tuning file and waits for its validation to finish; returns its id. */
export async function uploadValidated(p: TestPlatform, key: string, name: string, content: string): Promise<string> {
  const body = new FormData();
  body.append('purpose', 'fine-tune');
  body.append('file_name', name);
  body.append('file', new Blob([content]), name);
  const res = await call(p.baseUrl, 'POST', '/v1/files/upload', { key, body });
  if (res.status !== 200) throw new Error(`upload of ${name} failed: ${JSON.stringify(res.body)}`);
  const done = await eventually(
    () => call(p.baseUrl, 'GET', `/v1/files/${res.body.id}`, { key }),
    (r) => !['PENDING', 'QUEUED', 'RUNNING'].includes(r.body.processing_status),
  );
  if (done.body.processing_status !== 'COMPLETED') {
    throw new Error(`${name} did not validate: ${JSON.stringify(done.body.validation_report)}`);
  }
  return res.body.id;
}

/**
 * The platform's API wired to a Temporal address where nothing listens (same database, blobs and
 * config): what a create does when its workflow cannot start. `close()` stops it.
 */
export async function startApiWithoutTemporal(p: TestPlatform): Promise<{ baseUrl: string; close(): void }> {
  const connection = Connection.lazy({ address: `127.0.0.1:${await freePort()}`, connectTimeout: 500 });
  const temporal = new Client({ connection, namespace: p.config.temporal.namespace });
  const app = createApp({
    config: p.config,
    db: p.db,
    temporal,
    logger: createLogger('api', 'silent'),
    blobs: p.blobs,
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => server.close() };
}
