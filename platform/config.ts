/**
 * Every setting Gantry reads from its environment, parsed in one place.
 * Processes call loadConfig() once at start; nothing else reads process.env.
 */
import type { ClusterSettings } from '../shared/clusters';
import path from 'node:path';
import { isIP } from 'node:net';
import { Keyring } from './keyring';
import { z } from 'zod';
import { GPU_TYPES, type GpuType } from '../shared/gpu-types';
import { parseImageReference } from '../shared/image-references';

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no', ''])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

/** What a fetch of a user-given URL may reach, and how much it may bring back. */
export interface RemoteFetchPolicy {
  allowPrivateHosts: boolean;
  maxBytes: number;
}

const port = z.coerce.number().int().min(0).max(65535);

/** Secrets that appeared as defaults in this repository (docker-compose.yml): never valid. */
const PUBLISHED_SECRETS = ['dev-only-signing-secret-change-me-0123456789'];

const csvGpuTypes = z
  .string()
  .transform((s) =>
    s
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean),
  )
  .pipe(z.array(z.enum(GPU_TYPES)));

/** A comma-separated list, its items trimmed, empty ones dropped (unset: none). */
const commaList = z
  .string()
  .default('')
  .transform((v) =>
    v
      .split(',')
      .map((item) => item.trim())
      .filter(Boolean),
  );

/** A root secret: long enough, and not one published in this repository. */
const rootSecret = z
  .string()
  .min(32)
  .refine(
    (v) => !PUBLISHED_SECRETS.includes(v),
    'is a published example value; set a random one (openssl rand -hex 32)',
  );

/** The size of Podman's storage a container host makes when it has none (GANTRY_CONTAINER_STORAGE_GIB). */
export const DEFAULT_CONTAINER_STORAGE_GIB = 200;

/** How long a GPU activity waits for a worker on its queue by default (GANTRY_GPU_QUEUE_WAIT_SECONDS). */
export const DEFAULT_GPU_QUEUE_WAIT_SECONDS = 30;

const EnvSchema = z.object({
  GANTRY_DATA_DIR: z.string().default('.data'),
  /** Where the first start writes the admin API key (default: <data dir>/admin-api-key). */
  GANTRY_ADMIN_KEY_FILE: z.string().optional(),
  GANTRY_HOST: z.string().default('127.0.0.1'),
  GANTRY_API_PORT: port.default(8080),
  GANTRY_GATEWAY_PORT: port.default(8081),
  /** Prometheus metrics of this process at http://<host>:<port>/metrics (unset: none). `./dev up` gives each process one. */
  GANTRY_METRICS_PORT: port.optional(),
  /** Requests per second each API key may make on average (0: no limit), and the burst it may reach. */
  GANTRY_RATE_LIMIT_PER_SECOND: z.coerce.number().min(0).default(500),
  GANTRY_RATE_LIMIT_BURST: z.coerce.number().int().min(1).default(1000),
  /** Per project (all its keys together): requests a second, and burst. */
  GANTRY_RATE_LIMIT_PROJECT_PER_SECOND: z.coerce.number().min(0).default(1000),
  GANTRY_RATE_LIMIT_PROJECT_BURST: z.coerce.number().int().min(1).default(2000),
  /** Per client address, before authentication (made-up keys included): requests a second, and burst. */
  GANTRY_RATE_LIMIT_ADDRESS_PER_SECOND: z.coerce.number().min(0).default(1000),
  GANTRY_RATE_LIMIT_ADDRESS_BURST: z.coerce.number().int().min(1).default(2000),
  /**
   * Express's `trust proxy` (e.g. `loopback`, or a hop count): behind a reverse proxy, the client
   * address the per-address limit sees is the proxy's unless this names it as trusted.
   */
  GANTRY_TRUST_PROXY: z.string().optional(),
  /** Endpoint adapters: how often a loaded adapter is checked on every replica (new replicas get it). */
  /** LoRA adapters one endpoint deployment holds; attaching one more needs `force` (the oldest is evicted). */
  GANTRY_ADAPTERS_PER_DEPLOYMENT: z.coerce.number().int().positive().default(8),
  GANTRY_ADAPTER_RESYNC_SECONDS: z.coerce.number().positive().default(15),
  /** Rollouts: how long each rolling batch or blue-green cut-over soaks before its gate (canaries set their own). */
  GANTRY_ROLLOUT_BATCH_SOAK_SECONDS: z.coerce.number().positive().default(30),
  /** Inference gateway: how long a request waits for a replica of an endpoint scaled to zero (or starting). */
  GANTRY_GATEWAY_WAKE_TIMEOUT_SECONDS: z.coerce.number().nonnegative().default(60),
  /**
   * Serverless calls (a catalog model by name, api/serverless-pools.ts): each project's requests a
   * second to one catalog model's pool on average (0: no limit), and the burst it may reach. The
   * pool is shared by every project; this is what keeps one from taking it all.
   */
  GANTRY_SERVERLESS_RATE_LIMIT_PER_SECOND: z.coerce.number().min(0).default(10),
  GANTRY_SERVERLESS_RATE_LIMIT_BURST: z.coerce.number().int().min(1).default(20),
  /** Serverless: the most replicas one catalog model's pool scales up to. */
  GANTRY_SERVERLESS_MAX_REPLICAS: z.coerce.number().int().min(1).default(2),
  /** Serverless: whole minutes a pool goes without a request before it scales to zero (the gateway counts requests per minute). */
  GANTRY_SERVERLESS_IDLE_MINUTES: z.coerce.number().int().min(1).default(5),
  GANTRY_JSON_BODY_LIMIT: z.string().default('1mb'),
  /** Largest file upload accepted (the spec's 25 GB for fine-tuning files). */
  GANTRY_MAX_UPLOAD_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(25 * 1024 ** 3),
  /** Base URL clients reach the API at; pre-signed upload URLs point here. */
  GANTRY_PUBLIC_URL: z.url().optional(),
  /**
   * The root of the installation's keys (platform/keyring.ts): the key that signs pre-signed URLs and
   * the key that seals deployment secrets and source tokens are derived from it, separately. Every
   * API replica and control worker needs the same one. A value published in this repository's
   * history is refused: anyone could forge URLs and open sealed values with it.
   */
  GANTRY_SIGNING_SECRET: rootSecret.optional(),
  /**
   * Earlier GANTRY_SIGNING_SECRETs, newest first, comma-separated: after a rotation, values sealed
   * and URLs signed under them still open until `scripts/reseal.ts` has moved what is stored.
   */
  GANTRY_PREVIOUS_SIGNING_SECRETS: commaList.pipe(z.array(rootSecret)),
  GANTRY_UPLOAD_URL_TTL_SECONDS: z.coerce.number().int().positive().default(3600),
  /** Bytes one project may store (files, volume uploads, registry models; uploads in progress too); 0: no quota. */
  GANTRY_PROJECT_STORAGE_QUOTA_BYTES: z.coerce
    .number()
    .int()
    .nonnegative()
    .default(1024 ** 4),
  /** Container replicas one project's deployments may run at their ceilings (sum of max_replicas); 0: no quota. */
  GANTRY_PROJECT_MAX_REPLICAS: z.coerce.number().int().nonnegative().default(100),
  /**
   * Largest file a single pre-signed PUT takes (streamed to storage); larger files use the multipart
   * flow. Unset: as large as any upload (GANTRY_MAX_UPLOAD_BYTES), so the SDKs' one-PUT flow takes
   * every file the spec allows.
   */
  GANTRY_MAX_SINGLE_PUT_BYTES: z.coerce.number().int().positive().optional(),
  /** Part size of multipart uploads (raised when a file would need more than 10,000 parts). */
  GANTRY_MULTIPART_PART_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(100 * 1024 ** 2),
  /** How long a validating activity may go silent before Temporal retries it on another worker. */
  GANTRY_VALIDATION_HEARTBEAT_TIMEOUT_SECONDS: z.coerce.number().int().positive().default(30),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),

  DATABASE_URL: z.string().optional(),
  /** Port of the embedded PostgreSQL that `./dev up` starts when DATABASE_URL is unset. */
  GANTRY_POSTGRES_PORT: port.default(5433),
  /** Ports of the Temporal dev server that `./dev up` starts when TEMPORAL_ADDRESS is unset. */
  GANTRY_TEMPORAL_PORT: port.default(7233),
  GANTRY_TEMPORAL_UI_PORT: port.default(8233),
  /** An existing Temporal CLI binary; otherwise it is built with `go install` into a cache. */
  TEMPORAL_CLI: z.string().optional(),

  TEMPORAL_ADDRESS: z.string().optional(),
  TEMPORAL_NAMESPACE: z.string().default('default'),
  TEMPORAL_TLS: bool.default(false),
  TEMPORAL_TLS_CERT: z.string().optional(),
  TEMPORAL_TLS_KEY: z.string().optional(),
  TEMPORAL_TLS_SERVER_NAME: z.string().optional(),
  TEMPORAL_API_KEY: z.string().optional(),

  /** How long a training activity may go silent before Temporal retries it (from its last checkpoint). */
  GANTRY_TRAINING_HEARTBEAT_TIMEOUT_SECONDS: z.coerce.number().int().positive().default(60),
  /**
   * Fine-tuning: a trainer that emits no progress event (a step, an eval, a checkpoint) for this
   * long is hung; it is killed and the job resumes from its last checkpoint, on this or another worker.
   */
  GANTRY_TRAINER_STALL_SECONDS: z.coerce.number().positive().default(1800),
  /** Fine-tuning: trainers one GPU worker runs at once; more wait on it, cancellable, the rest stay queued. */
  GANTRY_TRAINING_SLOTS: z.coerce.number().int().positive().default(1),
  /** Python with the reference trainer's packages (./dev creates .venv). */
  GANTRY_TRAINER_PYTHON: z.string().default('.venv/bin/python'),
  // Empty is unset: compose passes `${GANTRY_MODEL_SERVER_IMAGE:-}` through as ''.
  GANTRY_MODEL_SERVER_IMAGE: z.string().trim().optional(),
  // The PyTorch model server's image (scripts/build-model-server-image.ts --torch); empty is unset.
  GANTRY_TORCH_MODEL_SERVER_IMAGE: z.string().trim().optional(),
  /** The speech environment's Python (faster-whisper, ffmpeg, the speaker encoder); `./dev` makes it. */
  GANTRY_SPEECH_PYTHON: z.string().default('.venv-speech/bin/python'),
  /**
   * Recognitions one speech host runs at once (each on 2 CPU threads, speech/gantry_speech/transcribe.py).
   * The default, 2, keeps two cores busy without thrashing.
   */
  GANTRY_SPEECH_SLOTS: z.coerce.number().int().min(1).max(64).default(2),
  /**
   * A speech host's own Whisper models, beyond those shipped on PyPI: one CTranslate2 conversion per
   * directory named after the model (`whisper-large-v3/`, …; providers/speech/model-directory.ts).
   */
  GANTRY_SPEECH_MODEL_DIR: z.string().min(1).optional(),
  /** Audio: seconds of audio per recognition activity (long audio is cut at pauses into chunks of about this). */
  GANTRY_AUDIO_CHUNK_SECONDS: z.coerce.number().min(10).max(3600).default(120),
  /** Audio: a speech host silent this long (it died) has its chunk retried on another. */
  GANTRY_AUDIO_HEARTBEAT_TIMEOUT_SECONDS: z.coerce.number().min(2).max(600).default(20),
  /** Audio: how long a request's work waits for a speech host (one that has its model) before the request fails with a 503. */
  GANTRY_AUDIO_HOST_WAIT_SECONDS: z.coerce.number().min(1).max(3600).default(120),
  /** Billing: how often the usage-metering schedule turns open GPU-hour and replica-hour intervals into records. */
  GANTRY_USAGE_METER_SECONDS: z.coerce.number().int().min(10).max(86_400).default(300),
  /** Python with the PyTorch trainer's packages (trainers/torch); set on GPU hosts that train real models. */
  GANTRY_TORCH_TRAINER_PYTHON: z.string().optional(),
  /**
   * The model directory: catalog weights as `<dir>/<hf repo>` (config, safetensors, tokenizer and
   * chat template), read by the PyTorch trainer, the model server and the API's tokenizers.
   * ./dev installs the catalog's real model there (trainers/torch/catalog-models.json).
   */
  GANTRY_MODEL_DIR: z.string().min(1).default('.models'),
  /** Accelerator types this host serves, e.g. "H100_SXM,L40_PCIE" (GPU worker only). */
  GANTRY_GPU_TYPES: csvGpuTypes.default(['H100_SXM']),
  /** How the GPU worker learns what its host has: nvidia-smi, a simulator, or auto-detect. */
  GANTRY_ACCELERATOR: z.enum(['auto', 'nvidia', 'simulated']).default('auto'),
  /** How long a GPU activity may wait for a worker on its queue before the workflow reports it. */
  GANTRY_GPU_QUEUE_WAIT_SECONDS: z.coerce.number().positive().default(DEFAULT_GPU_QUEUE_WAIT_SECONDS),
  /** How long workers give in-flight activities to finish on shutdown before cancelling them. */
  GANTRY_WORKER_SHUTDOWN_GRACE_SECONDS: z.coerce.number().nonnegative().default(10),
  /** Local fleet simulator: time a simulated node spends in each boot phase (and a volume or driver step). */
  GANTRY_FLEET_STEP_MS: z.coerce.number().int().nonnegative().default(1000),
  /** Clusters: seconds between health-check rounds (and autoscaler observations). */
  GANTRY_CLUSTER_HEALTH_CHECK_SECONDS: z.coerce.number().positive().default(60),
  /** Clusters: the least time between two autoscaling actions. */
  GANTRY_CLUSTER_AUTOSCALE_COOLDOWN_SECONDS: z.coerce.number().nonnegative().default(300),
  /** Clusters: drain window of a preempted node (the spec's 300 seconds). */
  GANTRY_PREEMPTION_GRACE_SECONDS: z.coerce.number().nonnegative().default(300),
  /** Clusters: repair rounds for failed acceptance or NCCL tests before a cluster settles as Degraded. */
  GANTRY_CLUSTER_TEST_REPAIR_ROUNDS: z.coerce.number().int().nonnegative().default(2),
  /** Clusters: main-loop rounds of one workflow run before it continues as new. */
  GANTRY_CLUSTER_ROUNDS_PER_RUN: z.coerce.number().int().positive().default(500),
  /** Queue: largest `payload` a job may carry, in bytes of JSON (413 above it). */
  GANTRY_QUEUE_MAX_PAYLOAD_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(512 * 1024),
  /**
   * Remote fetches (model uploads from a URL): allow hosts that resolve to loopback, private or
   * link-local addresses. Off by default, so a URL cannot reach the platform's own network.
   */
  GANTRY_REMOTE_FETCH_ALLOW_PRIVATE: bool.default(false),
  /** Largest model a remote upload may bring in, in bytes (the whole download). */
  GANTRY_MODEL_UPLOAD_MAX_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(500 * 1024 ** 3),
  /** Queue: how long finished and canceled jobs stay readable. */
  GANTRY_QUEUE_RETENTION_SECONDS: z.coerce
    .number()
    .int()
    .positive()
    .default(7 * 24 * 3600),
  /**
   * Blobs: how often the control worker deletes blobs whose rows are gone but whose delete did not
   * happen (the process died in between, or storage refused it); providers/storage/blob-deletions.ts.
   */
  GANTRY_BLOB_DELETION_RETRY_SECONDS: z.coerce.number().positive().default(60),
  /**
   * Container runtime of this host's control worker: `podman` runs each replica as an isolated
   * container of its image (rootful Podman); `process` runs deployments' commands as host
   * processes with Gantry's own rights, for a single trusted user only (it says so at start);
   * `none` runs no replicas here.
   */
  GANTRY_CONTAINER_RUNTIME: z.enum(['podman', 'process', 'none']).default('none'),
  /**
   * `yes`: this installation serves one trusted tenant, and says so in so many words. The `process`
   * container runtime, which runs deployments as host processes of Gantry's own user, starts only
   * then; the API then creates no second project, and a process host runs one project's replicas.
   * Only `yes` or `no`: a `true` or `1` set in passing is an error, not a declaration.
   */
  GANTRY_SINGLE_TENANT: z.enum(['yes', 'no']).default('no'),
  /**
   * Gantry's API as a container host reaches it (default: GANTRY_PUBLIC_URL): podman replicas reach
   * it, and nothing else, through a forwarder on their bridge, and find its address in GANTRY_BASE_URL.
   */
  GANTRY_REPLICA_API_URL: z.url().optional(),
  /** Image registries the podman runtime reaches over plain HTTP (host:port, comma-separated), such as a local one. */
  GANTRY_INSECURE_REGISTRIES: commaList,
  /**
   * The limits a podman replica gets when its deployment sets no `cpu`, `memory` or `storage` (GiB
   * its container may write), so that no tenant's container has the whole host by leaving them out.
   * Each is at most its ceiling below.
   */
  GANTRY_REPLICA_DEFAULT_CPUS: z.coerce.number().positive().default(2),
  GANTRY_REPLICA_DEFAULT_MEMORY_GIB: z.coerce.number().positive().default(4),
  GANTRY_REPLICA_DEFAULT_STORAGE_GIB: z.coerce.number().positive().default(10),
  /**
   * The most one replica may have: a deployment asking for more `cpu`, `memory` or `storage` is
   * refused (400 naming the field). A replica's image is at most GANTRY_REPLICA_MAX_IMAGE_GIB
   * unpacked: a larger one fails its launch, and is removed from the host. That holds for the model
   * server's image (GANTRY_MODEL_SERVER_IMAGE) too: the ceiling must leave room for it.
   */
  GANTRY_REPLICA_MAX_CPUS: z.coerce.number().positive().default(16),
  GANTRY_REPLICA_MAX_MEMORY_GIB: z.coerce.number().positive().default(64),
  // 100: what the jig CLI asks for by default (its DeployConfig.storage).
  GANTRY_REPLICA_MAX_STORAGE_GIB: z.coerce.number().positive().default(100),
  GANTRY_REPLICA_MAX_IMAGE_GIB: z.coerce.number().positive().default(20),
  /**
   * Size of the btrfs filesystem image a podman container host makes for Podman's storage (images
   * and replicas' writable layers) when the machine has none yet; see container-storage.ts. Made once,
   * sparse: it takes the host's disk only as it fills.
   */
  GANTRY_CONTAINER_STORAGE_GIB: z.coerce.number().int().positive().default(DEFAULT_CONTAINER_STORAGE_GIB),
  /**
   * Where tenants push images for their deployments (host[/path]); each project's base path is
   * `<this>/<project slug>` (GET /v1/image-repositories/base-path, which the official jig CLI reads).
   * Unset: no registry of its own; deployments name images wherever they are. A project runs images
   * of its own path here only (shared/image-references.ts), pulled with the container hosts' own
   * credentials (root's `podman login`), so the registry should refuse anonymous pulls.
   */
  GANTRY_IMAGE_REGISTRY: z
    .string()
    .max(200)
    .refine(
      (v) => parseImageReference(`${v.replace(/\/+$/, '')}/x`) !== undefined,
      'a registry host[:port], then an optional /path',
    )
    .optional(),
  /** Deployments: longest wait before replacing a replica that keeps dying. */
  GANTRY_DEPLOYMENT_MAX_RESTART_BACKOFF_SECONDS: z.coerce.number().int().positive().default(60),
  /** Deployments: how often the autoscaler observes its metric. */
  GANTRY_DEPLOYMENT_AUTOSCALE_INTERVAL_SECONDS: z.coerce.number().positive().default(15),
  /** Deployments: least time after an autoscaling action before a scale-down. */
  GANTRY_DEPLOYMENT_AUTOSCALE_COOLDOWN_SECONDS: z.coerce.number().nonnegative().default(60),
  /** Deployments: how long a replica launch waits for a container host before it fails and says so. */
  GANTRY_CONTAINER_QUEUE_WAIT_SECONDS: z.coerce.number().positive().default(60),
  /**
   * Deployments: how long a container host keeps a replica whose supervisor detached (its run
   * continued as new or ended, or the host was too busy to heartbeat) for a run to re-attach,
   * before it stops the replica.
   */
  GANTRY_REPLICA_ADOPTION_SECONDS: z.coerce.number().positive().default(120),
  /**
   * Deployments: how long a container host keeps files its replicas mounted (volume versions, model
   * revisions, adapters) once no replica of it mounts them, for a replica started again to find
   * them without fetching them anew; then they are removed.
   */
  GANTRY_HOST_FILES_KEEP_SECONDS: z.coerce.number().nonnegative().default(3600),
  /**
   * Deployments: the size past which a replica's log is rotated; a replica keeps at most its log and
   * the one before, each about this size.
   */
  GANTRY_REPLICA_LOG_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(4096)
    .default(50 * 1024 * 1024),
  /**
   * Deployments: this container host's stable name. With it, the host's queue keeps its name across
   * restarts, a restarted worker adopts the replicas that outlived the previous one, and a shutdown
   * leaves them running for it. Without it, the name kept in the data directory
   * (providers/containers/host-identity.ts): a host restarted after a crash adopts its replicas too,
   * but a shutdown stops them. One worker process per name.
   */
  GANTRY_CONTAINER_HOST_ID: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, 'letters, digits, dots, dashes and underscores')
    .optional(),
  /**
   * Deployments: the address this container host publishes its replicas' ports on, and where the
   * gateway and the other hosts reach them (recorded with each replica). 127.0.0.1 serves one
   * machine; with container hosts on several machines, each names its own address on a private
   * network the gateway shares (the replicas behind it take no API key).
   */
  GANTRY_CONTAINER_HOST_ADDRESS: z
    .string()
    .refine((a) => isIP(a) !== 0 && a !== '0.0.0.0' && a !== '::', 'one IP address of this host (not 0.0.0.0)')
    .default('127.0.0.1'),
  /** Deployments: main-loop rounds of one workflow run before it continues as new. */
  GANTRY_DEPLOYMENT_ROUNDS_PER_RUN: z.coerce.number().int().positive().default(1000),
});

/** Every environment variable Gantry's configuration reads (a deployment file setting another is a typo). */
export const CONFIG_VARIABLES: ReadonlySet<string> = new Set(Object.keys(EnvSchema.shape));

export interface TemporalSettings {
  address: string;
  namespace: string;
  tls?: { serverName?: string; clientCertPair?: { crt: string; key: string } } | boolean;
  apiKey?: string;
}

export interface GantryConfig {
  dataDir: string;
  adminKeyFile: string;
  host: string;
  apiPort: number;
  gatewayPort: number;
  gatewayWakeTimeoutSeconds: number;
  serverless: { rateLimit: { perSecond: number; burst: number }; maxReplicas: number; idleMinutes: number };
  metricsPort?: number;
  rateLimitPerSecond: number;
  rateLimitBurst: number;
  projectRateLimit: { perSecond: number; burst: number };
  addressRateLimit: { perSecond: number; burst: number };
  trustProxy?: string;
  adapterResyncSeconds: number;
  adaptersPerDeployment: number;
  rolloutBatchSoakSeconds: number;
  jsonBodyLimit: string;
  maxUploadBytes: number;
  publicUrl: string;
  /** The installation's signing and sealing keys; absent when GANTRY_SIGNING_SECRET is not set. */
  keyring?: Keyring;
  uploadUrlTtlSeconds: number;
  maxSinglePutBytes: number;
  projectStorageQuotaBytes: number;
  projectMaxReplicas: number;
  multipartPartBytes: number;
  validationHeartbeatTimeoutSeconds: number;
  blobDir: string;
  logLevel: z.infer<typeof EnvSchema>['LOG_LEVEL'];
  databaseUrl?: string;
  postgresPort: number;
  temporalPort: number;
  temporalUiPort: number;
  temporalCli?: string;
  /** True when TEMPORAL_ADDRESS points at an existing cluster (no dev server is started). */
  externalTemporal: boolean;
  temporal: TemporalSettings & {
    tlsCertPath?: string;
    tlsKeyPath?: string;
    tlsServerName?: string;
    tlsEnabled: boolean;
  };
  gpuTypes: GpuType[];
  trainerPython: string;
  /**
   * The image endpoints' model servers run from (scripts/build-model-server-image.ts, or the
   * Gantry image); unset: they run this installation's trainer Python as a host process, which
   * only the process runtime can. The platform's own image: the one image a container host runs
   * from its own copy for any project (shared/image-references.ts).
   */
  modelServerImage?: string;
  /**
   * The image the PyTorch model server (torch catalog bases, their fine-tunes and adapters) runs
   * from; unset: GANTRY_TORCH_TRAINER_PYTHON as a host process (the process runtime only).
   */
  torchModelServerImage?: string;
  speechPython: string;
  speechSlots: number;
  speechModelDir?: string;
  audioChunkSeconds: number;
  usageMeterSeconds: number;
  audioHeartbeatTimeoutSeconds: number;
  audioHostWaitSeconds: number;
  torchTrainerPython?: string;
  modelDir: string;
  trainingHeartbeatTimeoutSeconds: number;
  trainerStallSeconds: number;
  trainingSlots: number;
  accelerator: 'auto' | 'nvidia' | 'simulated';
  gpuQueueWaitSeconds: number;
  workerShutdownGraceSeconds: number;
  fleetStepMs: number;
  queueMaxPayloadBytes: number;
  remoteFetch: RemoteFetchPolicy;
  queueRetentionSeconds: number;
  blobDeletionRetrySeconds: number;
  containerRuntime: 'podman' | 'process' | 'none';
  /** GANTRY_SINGLE_TENANT=yes: one trusted tenant (the process runtime may run; no second project). */
  singleTenant: boolean;
  insecureRegistries: string[];
  /** Limits of a podman replica whose deployment sets none. */
  replicaDefaultLimits: ReplicaLimits;
  /** The most one replica may have (deployments asking for more are refused), and its image's largest size. */
  replicaMaxLimits: ReplicaLimits & { imageGiB: number };
  /** Size of the filesystem a podman container host makes for Podman's storage. */
  containerStorageGiB: number;
  imageRegistry?: string;
  replicaApiUrl: string;
  deploymentMaxRestartBackoffSeconds: number;
  deploymentAutoscaleIntervalSeconds: number;
  deploymentAutoscaleCooldownSeconds: number;
  deploymentRoundsPerRun: number;
  containerQueueWaitSeconds: number;
  replicaAdoptionSeconds: number;
  hostFilesKeepSeconds: number;
  replicaLogMaxBytes: number;
  containerHostId?: string;
  containerHostAddress: string;
  clusterSettings: ClusterSettings;
}

/** A replica's CPUs, memory and writable storage (GiB). */
export interface ReplicaLimits {
  cpus: number;
  memoryGiB: number;
  storageGiB: number;
}

export class ConfigError extends Error {}

/** Each default a replica gets must be within the ceilings every replica is held to. */
function defaultsAboveCeilings(e: z.infer<typeof EnvSchema>): string[] {
  const pairs = [
    ['GANTRY_REPLICA_DEFAULT_CPUS', 'GANTRY_REPLICA_MAX_CPUS'],
    ['GANTRY_REPLICA_DEFAULT_MEMORY_GIB', 'GANTRY_REPLICA_MAX_MEMORY_GIB'],
    ['GANTRY_REPLICA_DEFAULT_STORAGE_GIB', 'GANTRY_REPLICA_MAX_STORAGE_GIB'],
  ] as const;
  return pairs.filter(([d, max]) => e[d] > e[max]).map(([d, max]) => `  ${d}: ${e[d]} is more than ${max} (${e[max]})`);
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): GantryConfig {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid environment:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  const above = defaultsAboveCeilings(e);
  if (above.length) throw new ConfigError(`Invalid environment:\n${above.join('\n')}`);
  return {
    dataDir: path.resolve(e.GANTRY_DATA_DIR),
    adminKeyFile: path.resolve(e.GANTRY_ADMIN_KEY_FILE ?? path.join(e.GANTRY_DATA_DIR, 'admin-api-key')),
    host: e.GANTRY_HOST,
    apiPort: e.GANTRY_API_PORT,
    gatewayPort: e.GANTRY_GATEWAY_PORT,
    gatewayWakeTimeoutSeconds: e.GANTRY_GATEWAY_WAKE_TIMEOUT_SECONDS,
    serverless: {
      rateLimit: { perSecond: e.GANTRY_SERVERLESS_RATE_LIMIT_PER_SECOND, burst: e.GANTRY_SERVERLESS_RATE_LIMIT_BURST },
      maxReplicas: e.GANTRY_SERVERLESS_MAX_REPLICAS,
      idleMinutes: e.GANTRY_SERVERLESS_IDLE_MINUTES,
    },
    metricsPort: e.GANTRY_METRICS_PORT,
    rateLimitPerSecond: e.GANTRY_RATE_LIMIT_PER_SECOND,
    rateLimitBurst: e.GANTRY_RATE_LIMIT_BURST,
    projectRateLimit: { perSecond: e.GANTRY_RATE_LIMIT_PROJECT_PER_SECOND, burst: e.GANTRY_RATE_LIMIT_PROJECT_BURST },
    addressRateLimit: { perSecond: e.GANTRY_RATE_LIMIT_ADDRESS_PER_SECOND, burst: e.GANTRY_RATE_LIMIT_ADDRESS_BURST },
    trustProxy: e.GANTRY_TRUST_PROXY,
    adapterResyncSeconds: e.GANTRY_ADAPTER_RESYNC_SECONDS,
    adaptersPerDeployment: e.GANTRY_ADAPTERS_PER_DEPLOYMENT,
    rolloutBatchSoakSeconds: e.GANTRY_ROLLOUT_BATCH_SOAK_SECONDS,
    jsonBodyLimit: e.GANTRY_JSON_BODY_LIMIT,
    maxUploadBytes: e.GANTRY_MAX_UPLOAD_BYTES,
    publicUrl: (e.GANTRY_PUBLIC_URL ?? `http://${e.GANTRY_HOST}:${e.GANTRY_API_PORT}`).replace(/\/+$/, ''),
    keyring: e.GANTRY_SIGNING_SECRET
      ? new Keyring(e.GANTRY_SIGNING_SECRET, e.GANTRY_PREVIOUS_SIGNING_SECRETS)
      : undefined,
    uploadUrlTtlSeconds: e.GANTRY_UPLOAD_URL_TTL_SECONDS,
    maxSinglePutBytes: e.GANTRY_MAX_SINGLE_PUT_BYTES ?? e.GANTRY_MAX_UPLOAD_BYTES,
    projectStorageQuotaBytes: e.GANTRY_PROJECT_STORAGE_QUOTA_BYTES,
    projectMaxReplicas: e.GANTRY_PROJECT_MAX_REPLICAS,
    multipartPartBytes: e.GANTRY_MULTIPART_PART_BYTES,
    validationHeartbeatTimeoutSeconds: e.GANTRY_VALIDATION_HEARTBEAT_TIMEOUT_SECONDS,
    blobDir: path.resolve(e.GANTRY_DATA_DIR, 'blobs'),
    logLevel: e.LOG_LEVEL,
    databaseUrl: e.DATABASE_URL,
    postgresPort: e.GANTRY_POSTGRES_PORT,
    temporalPort: e.GANTRY_TEMPORAL_PORT,
    temporalUiPort: e.GANTRY_TEMPORAL_UI_PORT,
    temporalCli: e.TEMPORAL_CLI,
    externalTemporal: Boolean(e.TEMPORAL_ADDRESS),
    temporal: {
      address: e.TEMPORAL_ADDRESS ?? `127.0.0.1:${e.GANTRY_TEMPORAL_PORT}`,
      namespace: e.TEMPORAL_NAMESPACE,
      tlsEnabled: e.TEMPORAL_TLS || Boolean(e.TEMPORAL_TLS_CERT) || Boolean(e.TEMPORAL_API_KEY),
      tlsCertPath: e.TEMPORAL_TLS_CERT,
      tlsKeyPath: e.TEMPORAL_TLS_KEY,
      tlsServerName: e.TEMPORAL_TLS_SERVER_NAME,
      apiKey: e.TEMPORAL_API_KEY,
    },
    gpuTypes: e.GANTRY_GPU_TYPES,
    trainerPython: path.resolve(e.GANTRY_TRAINER_PYTHON),
    modelServerImage: e.GANTRY_MODEL_SERVER_IMAGE || undefined,
    torchModelServerImage: e.GANTRY_TORCH_MODEL_SERVER_IMAGE || undefined,
    speechPython: path.resolve(e.GANTRY_SPEECH_PYTHON),
    speechSlots: e.GANTRY_SPEECH_SLOTS,
    speechModelDir: e.GANTRY_SPEECH_MODEL_DIR && path.resolve(e.GANTRY_SPEECH_MODEL_DIR),
    audioChunkSeconds: e.GANTRY_AUDIO_CHUNK_SECONDS,
    usageMeterSeconds: e.GANTRY_USAGE_METER_SECONDS,
    audioHeartbeatTimeoutSeconds: e.GANTRY_AUDIO_HEARTBEAT_TIMEOUT_SECONDS,
    audioHostWaitSeconds: e.GANTRY_AUDIO_HOST_WAIT_SECONDS,
    torchTrainerPython: e.GANTRY_TORCH_TRAINER_PYTHON ? path.resolve(e.GANTRY_TORCH_TRAINER_PYTHON) : undefined,
    modelDir: path.resolve(e.GANTRY_MODEL_DIR),
    trainingHeartbeatTimeoutSeconds: e.GANTRY_TRAINING_HEARTBEAT_TIMEOUT_SECONDS,
    trainerStallSeconds: e.GANTRY_TRAINER_STALL_SECONDS,
    trainingSlots: e.GANTRY_TRAINING_SLOTS,
    accelerator: e.GANTRY_ACCELERATOR,
    gpuQueueWaitSeconds: e.GANTRY_GPU_QUEUE_WAIT_SECONDS,
    workerShutdownGraceSeconds: e.GANTRY_WORKER_SHUTDOWN_GRACE_SECONDS,
    fleetStepMs: e.GANTRY_FLEET_STEP_MS,
    queueMaxPayloadBytes: e.GANTRY_QUEUE_MAX_PAYLOAD_BYTES,
    remoteFetch: { allowPrivateHosts: e.GANTRY_REMOTE_FETCH_ALLOW_PRIVATE, maxBytes: e.GANTRY_MODEL_UPLOAD_MAX_BYTES },
    queueRetentionSeconds: e.GANTRY_QUEUE_RETENTION_SECONDS,
    blobDeletionRetrySeconds: e.GANTRY_BLOB_DELETION_RETRY_SECONDS,
    containerRuntime: e.GANTRY_CONTAINER_RUNTIME,
    singleTenant: e.GANTRY_SINGLE_TENANT === 'yes',
    insecureRegistries: e.GANTRY_INSECURE_REGISTRIES,
    replicaDefaultLimits: {
      cpus: e.GANTRY_REPLICA_DEFAULT_CPUS,
      memoryGiB: e.GANTRY_REPLICA_DEFAULT_MEMORY_GIB,
      storageGiB: e.GANTRY_REPLICA_DEFAULT_STORAGE_GIB,
    },
    replicaMaxLimits: {
      cpus: e.GANTRY_REPLICA_MAX_CPUS,
      memoryGiB: e.GANTRY_REPLICA_MAX_MEMORY_GIB,
      storageGiB: e.GANTRY_REPLICA_MAX_STORAGE_GIB,
      imageGiB: e.GANTRY_REPLICA_MAX_IMAGE_GIB,
    },
    containerStorageGiB: e.GANTRY_CONTAINER_STORAGE_GIB,
    imageRegistry: e.GANTRY_IMAGE_REGISTRY?.replace(/\/+$/, ''),
    replicaApiUrl: e.GANTRY_REPLICA_API_URL ?? e.GANTRY_PUBLIC_URL ?? `http://${e.GANTRY_HOST}:${e.GANTRY_API_PORT}`,
    deploymentMaxRestartBackoffSeconds: e.GANTRY_DEPLOYMENT_MAX_RESTART_BACKOFF_SECONDS,
    deploymentAutoscaleIntervalSeconds: e.GANTRY_DEPLOYMENT_AUTOSCALE_INTERVAL_SECONDS,
    deploymentAutoscaleCooldownSeconds: e.GANTRY_DEPLOYMENT_AUTOSCALE_COOLDOWN_SECONDS,
    deploymentRoundsPerRun: e.GANTRY_DEPLOYMENT_ROUNDS_PER_RUN,
    containerQueueWaitSeconds: e.GANTRY_CONTAINER_QUEUE_WAIT_SECONDS,
    replicaAdoptionSeconds: e.GANTRY_REPLICA_ADOPTION_SECONDS,
    hostFilesKeepSeconds: e.GANTRY_HOST_FILES_KEEP_SECONDS,
    replicaLogMaxBytes: e.GANTRY_REPLICA_LOG_MAX_BYTES,
    containerHostId: e.GANTRY_CONTAINER_HOST_ID,
    containerHostAddress: e.GANTRY_CONTAINER_HOST_ADDRESS,
    clusterSettings: {
      healthCheckIntervalSeconds: e.GANTRY_CLUSTER_HEALTH_CHECK_SECONDS,
      autoscaleCooldownSeconds: e.GANTRY_CLUSTER_AUTOSCALE_COOLDOWN_SECONDS,
      preemptionGraceSeconds: e.GANTRY_PREEMPTION_GRACE_SECONDS,
      maxTestRepairRounds: e.GANTRY_CLUSTER_TEST_REPAIR_ROUNDS,
      maxRoundsPerRun: e.GANTRY_CLUSTER_ROUNDS_PER_RUN,
      gpuQueueWaitSeconds: e.GANTRY_GPU_QUEUE_WAIT_SECONDS,
    },
  };
}

export function requireDatabaseUrl(config: GantryConfig): string {
  if (!config.databaseUrl) {
    throw new ConfigError(
      'DATABASE_URL is not set. Start the whole platform with `./dev up` (embedded PostgreSQL), or point DATABASE_URL at a PostgreSQL server.',
    );
  }
  return config.databaseUrl;
}
