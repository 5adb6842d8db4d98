/**
 * Every setting Gantry reads from its environment, parsed in one place, and what of the environment
 * its child processes inherit. Processes call loadConfig() once at start; nothing else reads
 * process.env (eslint.config.mjs holds it).
 *
 * Each setting is declared once, at the field of the configuration it sets: its variable, its
 * parsing (zod: type, validation, default) and a line of documentation (the table of
 * docs/operators/configuration.md, written from SETTINGS by scripts/write-configuration-page.ts). The few fields computed from more than one setting (a fallback, a derived path) are built
 * in derivedFields() from settings declared in INPUTS.
 */
import type { ClusterSettings } from '../shared/clusters';
import path from 'node:path';
import { isIP } from 'node:net';
import { Keyring } from './keyring';
import { z } from 'zod';
import { GPU_TYPES } from '../shared/gpu-types';
import { parseImageReference } from '../shared/image-references';

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no', ''])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

/** What a fetch of a user-given URL may reach, and how much it may bring back. */
export interface RemoteFetchPolicy {
  allowPrivateHosts: boolean;
  maxBytes: number;
}

/** A replica's CPUs, memory and writable storage (GiB). */
export interface ReplicaLimits {
  cpus: number;
  memoryGiB: number;
  storageGiB: number;
}

export interface TemporalSettings {
  address: string;
  namespace: string;
  tls?: { serverName?: string; clientCertPair?: { crt: string; key: string } } | boolean;
  apiKey?: string;
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

/** A path, made absolute against the working directory. */
const absolutePath = (p: string) => path.resolve(p);

/** The size of Podman's storage a container host makes when it has none (GANTRY_CONTAINER_STORAGE_GIB). */
export const DEFAULT_CONTAINER_STORAGE_GIB = 200;

/** How long a GPU activity waits for a worker on its queue by default (GANTRY_GPU_QUEUE_WAIT_SECONDS). */
export const DEFAULT_GPU_QUEUE_WAIT_SECONDS = 30;

/** One environment variable: its name, how it is parsed (type, validation, default) and what it sets. */
export interface Setting<S extends z.ZodType = z.ZodType> {
  readonly variable: string;
  readonly schema: S;
  /** One line for the configuration page's table (docs/operators/configuration.md). */
  readonly doc: string;
}

const setting = <S extends z.ZodType>(variable: string, schema: S, doc: string): Setting<S> => ({
  variable,
  schema,
  doc,
});

interface SettingTree {
  readonly [field: string]: Setting | SettingTree;
}

/** What a tree of settings parses to: each setting's value at its field, optional where it may be unset. */
type Parsed<T> = Simplify<
  { -readonly [K in keyof T as undefined extends Value<T[K]> ? never : K]: Value<T[K]> } & {
    -readonly [K in keyof T as undefined extends Value<T[K]> ? K : never]?: Value<T[K]>;
  }
>;
type Value<N> = N extends Setting<infer S> ? z.output<S> : Parsed<N>;
type Simplify<T> = { [K in keyof T]: T[K] } & {};

/** The settings that set one field each, where that field is in the configuration. */
const FIELDS = {
  dataDir: setting(
    'GANTRY_DATA_DIR',
    z.string().default('.data').transform(absolutePath),
    'local state: SQLite history, PostgreSQL, blobs (`blobs/`), admin key',
  ),
  host: setting('GANTRY_HOST', z.string().default('127.0.0.1'), 'address the API and gateway bind'),
  apiPort: setting('GANTRY_API_PORT', port.default(8080), 'port of the API'),
  gatewayPort: setting('GANTRY_GATEWAY_PORT', port.default(8081), 'port of the inference gateway'),
  gatewayWakeTimeoutSeconds: setting(
    'GANTRY_GATEWAY_WAKE_TIMEOUT_SECONDS',
    z.coerce.number().nonnegative().default(60),
    'how long an inference request waits for a replica of an endpoint scaled to zero or starting',
  ),
  // The pool of a catalog model (api/serverless-pools.ts) is shared by every project; the per-project
  // limit is what keeps one from taking it all.
  serverless: {
    rateLimit: {
      perSecond: setting(
        'GANTRY_SERVERLESS_RATE_LIMIT_PER_SECOND',
        z.coerce.number().min(0).default(10),
        "serverless calls: each project's requests a second to one catalog model's shared pool (0: no limit); over it, 429 with `Retry-After`",
      ),
      burst: setting(
        'GANTRY_SERVERLESS_RATE_LIMIT_BURST',
        z.coerce.number().int().min(1).default(20),
        'serverless calls: the burst each project may reach per catalog model',
      ),
    },
    maxReplicas: setting(
      'GANTRY_SERVERLESS_MAX_REPLICAS',
      z.coerce.number().int().min(1).default(2),
      "serverless: the most replicas one catalog model's pool scales up to",
    ),
    idleMinutes: setting(
      'GANTRY_SERVERLESS_IDLE_MINUTES',
      z.coerce.number().int().min(1).default(5),
      'serverless: whole minutes a pool goes without a request before it scales to zero (the gateway counts requests per minute)',
    ),
  },
  metricsPort: setting(
    'GANTRY_METRICS_PORT',
    port.optional(),
    'Prometheus metrics of this process at `http://<host>:<port>/metrics` (unset: none; `./dev up` gives each process one, counting up from `GANTRY_METRICS_BASE_PORT`, default 9464)',
  ),
  rateLimitPerSecond: setting(
    'GANTRY_RATE_LIMIT_PER_SECOND',
    z.coerce.number().min(0).default(500),
    'requests per second each API key may make on average (`0`: no limit); 429 with `Retry-After` beyond',
  ),
  rateLimitBurst: setting(
    'GANTRY_RATE_LIMIT_BURST',
    z.coerce.number().int().min(1).default(1000),
    'the burst each API key may reach',
  ),
  projectRateLimit: {
    perSecond: setting(
      'GANTRY_RATE_LIMIT_PROJECT_PER_SECOND',
      z.coerce.number().min(0).default(1000),
      'requests per second of all keys of one project together',
    ),
    burst: setting(
      'GANTRY_RATE_LIMIT_PROJECT_BURST',
      z.coerce.number().int().min(1).default(2000),
      'the burst of all keys of one project together',
    ),
  },
  addressRateLimit: {
    perSecond: setting(
      'GANTRY_RATE_LIMIT_ADDRESS_PER_SECOND',
      z.coerce.number().min(0).default(1000),
      'requests per second per client address, before authentication (made-up keys included)',
    ),
    burst: setting(
      'GANTRY_RATE_LIMIT_ADDRESS_BURST',
      z.coerce.number().int().min(1).default(2000),
      'the burst per client address, before authentication',
    ),
  },
  // Behind a reverse proxy, the client address the per-address limit sees is the proxy's unless this
  // names it as trusted.
  trustProxy: setting(
    'GANTRY_TRUST_PROXY',
    z.string().optional(),
    "Express's `trust proxy` (e.g. `loopback`, or a hop count), so the address limit sees clients behind a reverse proxy",
  ),
  adapterResyncSeconds: setting(
    'GANTRY_ADAPTER_RESYNC_SECONDS',
    z.coerce.number().positive().default(15),
    'endpoint adapters: how often a loaded adapter is checked on every replica (new replicas get it)',
  ),
  adaptersPerDeployment: setting(
    'GANTRY_ADAPTERS_PER_DEPLOYMENT',
    z.coerce.number().int().positive().default(8),
    'LoRA adapters one endpoint deployment holds; attaching one more needs `force` (the oldest is evicted)',
  ),
  rolloutBatchSoakSeconds: setting(
    'GANTRY_ROLLOUT_BATCH_SOAK_SECONDS',
    z.coerce.number().positive().default(30),
    'soak of each rolling batch or blue-green cut-over before its gate (canaries set their own)',
  ),
  jsonBodyLimit: setting(
    'GANTRY_JSON_BODY_LIMIT',
    z.string().default('1mb'),
    'larger JSON bodies are refused with 413',
  ),
  maxUploadBytes: setting(
    'GANTRY_MAX_UPLOAD_BYTES',
    z.coerce
      .number()
      .int()
      .positive()
      .default(25 * 1024 ** 3),
    "largest file upload (413 above it; the spec's 25 GB for fine-tuning files)",
  ),
  uploadUrlTtlSeconds: setting(
    'GANTRY_UPLOAD_URL_TTL_SECONDS',
    z.coerce.number().int().positive().default(3600),
    'lifetime of pre-signed upload URLs; uploads that never arrive are discarded after it',
  ),
  projectStorageQuotaBytes: setting(
    'GANTRY_PROJECT_STORAGE_QUOTA_BYTES',
    z.coerce
      .number()
      .int()
      .nonnegative()
      .default(1024 ** 4),
    'bytes one project may store: files, volume uploads, registry models (uploads in progress included); `0`: no quota',
  ),
  projectMaxReplicas: setting(
    'GANTRY_PROJECT_MAX_REPLICAS',
    z.coerce.number().int().nonnegative().default(100),
    "container replicas one project's deployments may run at their ceilings (the sum of `max_replicas`, endpoint deployments' too); `0`: no quota",
  ),
  multipartPartBytes: setting(
    'GANTRY_MULTIPART_PART_BYTES',
    z.coerce
      .number()
      .int()
      .positive()
      .default(100 * 1024 ** 2),
    'part size of multipart uploads (raised when a file would need more than 10,000 parts)',
  ),
  validationHeartbeatTimeoutSeconds: setting(
    'GANTRY_VALIDATION_HEARTBEAT_TIMEOUT_SECONDS',
    z.coerce.number().int().positive().default(30),
    'a validating worker silent this long is presumed lost; another resumes its work',
  ),
  logLevel: setting(
    'LOG_LEVEL',
    z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    'pino level; logs are JSON lines, one per event, with request ids',
  ),
  databaseUrl: setting(
    'DATABASE_URL',
    z.string().optional(),
    'use an existing PostgreSQL server instead of the embedded one (behind a connection pooler, one that keeps prepared statements per client: PgBouncer 1.21 or later with `max_prepared_statements`, or session pooling)',
  ),
  postgresPort: setting(
    'GANTRY_POSTGRES_PORT',
    port.default(5433),
    'port of the embedded PostgreSQL that `./dev up` starts when DATABASE_URL is unset',
  ),
  temporalPort: setting(
    'GANTRY_TEMPORAL_PORT',
    port.default(7233),
    'port of the Temporal dev server that `./dev up` starts when TEMPORAL_ADDRESS is unset',
  ),
  temporalUiPort: setting('GANTRY_TEMPORAL_UI_PORT', port.default(8233), "port of the Temporal dev server's UI"),
  temporalCli: setting(
    'TEMPORAL_CLI',
    z.string().optional(),
    'an existing Temporal CLI binary (unset: built with `go install` into a cache)',
  ),
  temporal: {
    namespace: setting('TEMPORAL_NAMESPACE', z.string().default('default'), 'the Temporal namespace'),
    tlsCertPath: setting('TEMPORAL_TLS_CERT', z.string().optional(), 'client certificate for mTLS to Temporal'),
    tlsKeyPath: setting(
      'TEMPORAL_TLS_KEY',
      z.string().optional(),
      "the client certificate's key, for mTLS to Temporal",
    ),
    tlsServerName: setting(
      'TEMPORAL_TLS_SERVER_NAME',
      z.string().optional(),
      "the server name TLS to Temporal expects in the server's certificate",
    ),
    apiKey: setting('TEMPORAL_API_KEY', z.string().optional(), 'API-key auth to Temporal (implies TLS)'),
  },
  gpuTypes: setting(
    'GANTRY_GPU_TYPES',
    csvGpuTypes.default(['H100_SXM']),
    'accelerator types a GPU worker serves (comma-separated), e.g. `H100_SXM,L40_PCIE`',
  ),
  trainerPython: setting(
    'GANTRY_TRAINER_PYTHON',
    z.string().default('.venv/bin/python').transform(absolutePath),
    "Python with the reference trainer's packages (./dev creates .venv)",
  ),
  // Empty is unset: compose passes `${GANTRY_MODEL_SERVER_IMAGE:-}` through as ''.
  modelServerImage: setting(
    'GANTRY_MODEL_SERVER_IMAGE',
    z
      .string()
      .trim()
      .optional()
      .transform((v) => v || undefined),
    "The image endpoints' model servers run from (scripts/build-model-server-image.ts, or the Gantry image: the one image a container host runs from its own copy for any project, shared/image-references.ts), with the model server where the Gantry image has it (`/app/.venv/bin/python`, `/app/trainers/reference`); unset, they run `GANTRY_TRAINER_PYTHON` as host processes (process runtime only)",
  ),
  torchModelServerImage: setting(
    'GANTRY_TORCH_MODEL_SERVER_IMAGE',
    z
      .string()
      .trim()
      .optional()
      .transform((v) => v || undefined),
    'The image the PyTorch model server (torch catalog bases, their fine-tunes and adapters) runs from (`scripts/build-model-server-image.ts --torch`: `/app/.venv-torch/bin/python`, `/app/trainers/torch`); unset, it runs `GANTRY_TORCH_TRAINER_PYTHON` as host processes (process runtime only)',
  ),
  speechPython: setting(
    'GANTRY_SPEECH_PYTHON',
    z.string().default('.venv-speech/bin/python').transform(absolutePath),
    "Python with `speech/requirements.txt` (the speech worker's recognizer, decoder and speaker encoder; `./dev` makes it)",
  ),
  // Each recognition runs on 2 CPU threads (speech/gantry_speech/transcribe.py): 2 keeps two cores
  // busy without thrashing.
  speechSlots: setting(
    'GANTRY_SPEECH_SLOTS',
    z.coerce.number().int().min(1).max(64).default(2),
    'speech tools (decode, recognize, diarize) one speech host runs at once, over all the models it serves; recognition on 2 CPU threads each',
  ),
  speechModelDir: setting(
    'GANTRY_SPEECH_MODEL_DIR',
    z
      .string()
      .min(1)
      .optional()
      .transform((v) => v && path.resolve(v)),
    "a speech host's own Whisper models, beyond those shipped on PyPI: one CTranslate2 conversion per directory, named `whisper-large-v3`, `whisper-small`, … (providers/speech/model-directory.ts)",
  ),
  audioChunkSeconds: setting(
    'GANTRY_AUDIO_CHUNK_SECONDS',
    z.coerce.number().min(10).max(3600).default(120),
    'audio per recognition activity (long audio is cut at pauses into chunks of about this)',
  ),
  usageMeterSeconds: setting(
    'GANTRY_USAGE_METER_SECONDS',
    z.coerce.number().int().min(10).max(86_400).default(300),
    'how often the `usage-metering` schedule turns GPU-hours and replica-hours of running resources into usage records',
  ),
  audioHeartbeatTimeoutSeconds: setting(
    'GANTRY_AUDIO_HEARTBEAT_TIMEOUT_SECONDS',
    z.coerce.number().min(2).max(600).default(20),
    'a speech host silent this long is presumed lost; its chunk is recognized elsewhere',
  ),
  audioHostWaitSeconds: setting(
    'GANTRY_AUDIO_HOST_WAIT_SECONDS',
    z.coerce.number().min(1).max(3600).default(120),
    "how long a request's work waits for a speech host that serves its model before the request is a 503",
  ),
  torchTrainerPython: setting(
    'GANTRY_TORCH_TRAINER_PYTHON',
    z
      .string()
      .optional()
      .transform((v) => (v ? path.resolve(v) : undefined)),
    'Python with `trainers/torch/requirements.txt`; set on GPU hosts that train the real model families',
  ),
  modelDir: setting(
    'GANTRY_MODEL_DIR',
    z.string().min(1).default('.models').transform(absolutePath),
    "where installed models live (`<dir>/<hf repo>`: config, safetensors, tokenizer and chat template; made by `./dev` from trainers/torch/catalog-models.json), read by the PyTorch trainer, the model server and the API's tokenizers; nothing is downloaded from a hub at run time",
  ),
  trainingHeartbeatTimeoutSeconds: setting(
    'GANTRY_TRAINING_HEARTBEAT_TIMEOUT_SECONDS',
    z.coerce.number().int().positive().default(60),
    'a training run silent this long is presumed lost and resumed from its last checkpoint',
  ),
  trainerStallSeconds: setting(
    'GANTRY_TRAINER_STALL_SECONDS',
    z.coerce.number().positive().default(1800),
    'a trainer that emits no progress event (a step, an eval, a checkpoint) this long is hung: killed, and the job resumed from its last checkpoint, on this or another worker',
  ),
  trainingSlots: setting(
    'GANTRY_TRAINING_SLOTS',
    z.coerce.number().int().positive().default(1),
    "trainers one GPU worker runs at once; further training tasks wait on it (cancellable), the rest stay queued for other hosts (a GPU host takes 4 tasks beyond its slots, for node tests and probes; the simulated host 64, as it stands for a whole fleet's nodes)",
  ),
  accelerator: setting(
    'GANTRY_ACCELERATOR',
    z.enum(['auto', 'nvidia', 'simulated']).default('auto'),
    '`nvidia` (require nvidia-smi), `simulated`, or `auto`: how the GPU worker learns what its host has',
  ),
  gpuQueueWaitSeconds: setting(
    'GANTRY_GPU_QUEUE_WAIT_SECONDS',
    z.coerce.number().positive().default(DEFAULT_GPU_QUEUE_WAIT_SECONDS),
    'how long GPU work waits for a worker before the workflow reports the queue as unserved',
  ),
  workerShutdownGraceSeconds: setting(
    'GANTRY_WORKER_SHUTDOWN_GRACE_SECONDS',
    z.coerce.number().nonnegative().default(10),
    'time in-flight activities get on shutdown before they are cancelled',
  ),
  fleetStepMs: setting(
    'GANTRY_FLEET_STEP_MS',
    z.coerce.number().int().nonnegative().default(1000),
    'fleet simulator: time a simulated node spends in each boot phase, and a volume or driver step (`0` in the bench)',
  ),
  queueMaxPayloadBytes: setting(
    'GANTRY_QUEUE_MAX_PAYLOAD_BYTES',
    z.coerce
      .number()
      .int()
      .positive()
      .default(512 * 1024),
    'largest queue job `payload` (JSON bytes; 413 above it)',
  ),
  remoteFetch: {
    // Off by default, so a URL cannot reach the platform's own network.
    allowPrivateHosts: setting(
      'GANTRY_REMOTE_FETCH_ALLOW_PRIVATE',
      bool.default(false),
      'let model uploads fetch URLs on loopback, private or link-local addresses (tests, a trusted lab)',
    ),
    maxBytes: setting(
      'GANTRY_MODEL_UPLOAD_MAX_BYTES',
      z.coerce
        .number()
        .int()
        .positive()
        .default(500 * 1024 ** 3),
      'largest model a remote upload may download',
    ),
  },
  queueRetentionSeconds: setting(
    'GANTRY_QUEUE_RETENTION_SECONDS',
    z.coerce
      .number()
      .int()
      .positive()
      .default(7 * 24 * 3600),
    'how long finished and canceled queue jobs stay readable',
  ),
  blobDeletionRetrySeconds: setting(
    'GANTRY_BLOB_DELETION_RETRY_SECONDS',
    z.coerce.number().positive().default(60),
    'how often the control worker deletes blobs whose rows are gone but whose delete failed or was cut short (providers/storage/blob-deletions.ts)',
  ),
  containerRuntime: setting(
    'GANTRY_CONTAINER_RUNTIME',
    z.enum(['podman', 'process', 'none']).default('none'),
    "`podman`: the control worker runs deployments' replicas as isolated containers of their images (root; Podman, runc, iptables); `process`: as host processes with Gantry's own rights, **single-tenant only, no isolation** (starts only with `GANTRY_SINGLE_TENANT=yes`); `none`: no replicas here",
  ),
  // Only `yes` or `no`: a `true` or `1` set in passing is an error, not a declaration.
  singleTenant: setting(
    'GANTRY_SINGLE_TENANT',
    z
      .enum(['yes', 'no'])
      .default('no')
      .transform((v) => v === 'yes'),
    "`yes` (only `yes` or `no`): this installation has one trusted tenant. The `process` runtime starts only then; the API then creates no second project, and a process host runs one project's replicas, refusing any other's",
  ),
  insecureRegistries: setting(
    'GANTRY_INSECURE_REGISTRIES',
    commaList,
    'Image registries (`host:port`, comma-separated) the podman runtime pulls from over plain HTTP',
  ),
  // Defaults, so that no tenant's container has the whole host by leaving its limits out; each is at
  // most its ceiling (checked in loadConfig).
  replicaDefaultLimits: {
    cpus: setting(
      'GANTRY_REPLICA_DEFAULT_CPUS',
      z.coerce.number().positive().default(2),
      'CPUs a podman replica may use when its deployment sets no `cpu` (at most `GANTRY_REPLICA_MAX_CPUS`)',
    ),
    memoryGiB: setting(
      'GANTRY_REPLICA_DEFAULT_MEMORY_GIB',
      z.coerce.number().positive().default(4),
      'memory (GiB) a podman replica may use when its deployment sets no `memory` (at most `GANTRY_REPLICA_MAX_MEMORY_GIB`)',
    ),
    storageGiB: setting(
      'GANTRY_REPLICA_DEFAULT_STORAGE_GIB',
      z.coerce.number().positive().default(10),
      'disk (GiB) a podman replica may write when its deployment sets no `storage` (at most `GANTRY_REPLICA_MAX_STORAGE_GIB`)',
    ),
  },
  replicaMaxLimits: {
    cpus: setting(
      'GANTRY_REPLICA_MAX_CPUS',
      z.coerce.number().positive().default(16),
      'the most `cpu` one replica may have: a deployment asking for more is refused (400 naming the field)',
    ),
    memoryGiB: setting(
      'GANTRY_REPLICA_MAX_MEMORY_GIB',
      z.coerce.number().positive().default(64),
      'the most `memory` (GiB) one replica may have: a deployment asking for more is refused (400 naming the field)',
    ),
    // 100: what the jig CLI asks for by default (its DeployConfig.storage).
    storageGiB: setting(
      'GANTRY_REPLICA_MAX_STORAGE_GIB',
      z.coerce.number().positive().default(100),
      'the most `storage` (GiB) one replica may have: a deployment asking for more is refused (400 naming the field)',
    ),
    // The model server's image (GANTRY_MODEL_SERVER_IMAGE) is held to it too: it must leave room for it.
    imageGiB: setting(
      'GANTRY_REPLICA_MAX_IMAGE_GIB',
      z.coerce.number().positive().default(20),
      "largest image (GiB, unpacked) a podman replica runs, the model server's included: a larger one fails its launch, and is removed from the host",
    ),
  },
  // Made once, sparse: it takes the host's disk only as it fills (container-storage.ts).
  containerStorageGiB: setting(
    'GANTRY_CONTAINER_STORAGE_GIB',
    z.coerce.number().int().positive().default(DEFAULT_CONTAINER_STORAGE_GIB),
    "size of the btrfs filesystem image (sparse) a podman container host makes for Podman's storage (images and replicas' writable layers) at `/var/lib/gantry-containers` when the machine has none; made once",
  ),
  // A project runs images of its own path here only (shared/image-references.ts), pulled with the
  // container hosts' own credentials (root's `podman login`), so the registry should refuse anonymous pulls.
  imageRegistry: setting(
    'GANTRY_IMAGE_REGISTRY',
    z
      .string()
      .max(200)
      .refine(
        (v) => parseImageReference(`${v.replace(/\/+$/, '')}/x`) !== undefined,
        'a registry host[:port], then an optional /path',
      )
      .optional()
      .transform((v) => v?.replace(/\/+$/, '')),
    "where tenants push deployment images (host[/path]); a project's base path is `<this>/<project slug>` (`GET /v1/image-repositories/base-path`, read by the jig CLI), the only path of it the project runs (see Security: Images); unset: no registry of its own",
  ),
  deploymentMaxRestartBackoffSeconds: setting(
    'GANTRY_DEPLOYMENT_MAX_RESTART_BACKOFF_SECONDS',
    z.coerce.number().int().positive().default(60),
    'longest wait before replacing a replica that keeps dying',
  ),
  deploymentAutoscaleIntervalSeconds: setting(
    'GANTRY_DEPLOYMENT_AUTOSCALE_INTERVAL_SECONDS',
    z.coerce.number().positive().default(15),
    "how often a deployment's autoscaler observes its metric",
  ),
  deploymentAutoscaleCooldownSeconds: setting(
    'GANTRY_DEPLOYMENT_AUTOSCALE_COOLDOWN_SECONDS',
    z.coerce.number().nonnegative().default(60),
    "least time after a deployment's autoscaling action before a scale-down",
  ),
  deploymentRoundsPerRun: setting(
    'GANTRY_DEPLOYMENT_ROUNDS_PER_RUN',
    z.coerce.number().int().positive().default(1000),
    'main-loop rounds of a deployment workflow run before it continues as new',
  ),
  containerQueueWaitSeconds: setting(
    'GANTRY_CONTAINER_QUEUE_WAIT_SECONDS',
    z.coerce.number().positive().default(60),
    'how long a replica launch waits for a container host before it fails with reason `NoContainerHost`',
  ),
  // A supervisor detaches when its run continues as new or ends, or the host is too busy to heartbeat.
  replicaAdoptionSeconds: setting(
    'GANTRY_REPLICA_ADOPTION_SECONDS',
    z.coerce.number().positive().default(120),
    'how long a container host keeps a replica no run supervises (for a run to re-attach) before it stops it',
  ),
  // So that a replica started again finds them without fetching them anew.
  hostFilesKeepSeconds: setting(
    'GANTRY_HOST_FILES_KEEP_SECONDS',
    z.coerce.number().nonnegative().default(3600),
    'how long a container host keeps a volume version, model revision or adapter directory after its replicas stopped mounting it, before it removes it from its disk',
  ),
  replicaLogMaxBytes: setting(
    'GANTRY_REPLICA_LOG_MAX_BYTES',
    z.coerce
      .number()
      .int()
      .min(4096)
      .default(50 * 1024 * 1024),
    "the size past which a replica's log is rotated; a container host keeps a replica's log and the one before it",
  ),
  // The name kept in the data directory otherwise: providers/containers/host-identity.ts.
  containerHostId: setting(
    'GANTRY_CONTAINER_HOST_ID',
    z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, 'letters, digits, dots, dashes and underscores')
      .optional(),
    "a container host's stable name: a restarted worker adopts the replicas the last one left, and a shutdown leaves them running for it (one process per name). Unset: the name kept in `.data/container-host-id` (adopted after a crash, stopped on shutdown)",
  ),
  // Recorded with each replica; the replicas behind it take no API key.
  containerHostAddress: setting(
    'GANTRY_CONTAINER_HOST_ADDRESS',
    z
      .string()
      .refine((a) => isIP(a) !== 0 && a !== '0.0.0.0' && a !== '::', 'one IP address of this host (not 0.0.0.0)')
      .default('127.0.0.1'),
    'where a container host publishes its replicas and the gateway and other hosts reach them (one IP of its machine; with several machines, on a private network the gateway shares)',
  ),
  clusterSettings: {
    healthCheckIntervalSeconds: setting(
      'GANTRY_CLUSTER_HEALTH_CHECK_SECONDS',
      z.coerce.number().positive().default(60),
      'interval of per-node health checks and autoscaler observations',
    ),
    autoscaleCooldownSeconds: setting(
      'GANTRY_CLUSTER_AUTOSCALE_COOLDOWN_SECONDS',
      z.coerce.number().nonnegative().default(300),
      'least time between two autoscaling actions of a cluster',
    ),
    preemptionGraceSeconds: setting(
      'GANTRY_PREEMPTION_GRACE_SECONDS',
      z.coerce.number().nonnegative().default(300),
      "drain window of a preempted node (the spec's 300 s; tests shorten it)",
    ),
    maxTestRepairRounds: setting(
      'GANTRY_CLUSTER_TEST_REPAIR_ROUNDS',
      z.coerce.number().int().nonnegative().default(2),
      'repair rounds for failed acceptance / NCCL tests before a cluster settles as Degraded',
    ),
    maxRoundsPerRun: setting(
      'GANTRY_CLUSTER_ROUNDS_PER_RUN',
      z.coerce.number().int().positive().default(500),
      'main-loop rounds of a cluster workflow run before it continues as new',
    ),
  },
  // The Dockerfile sets NODE_ENV=production; tests and `./dev up` check every response, so the
  // OpenAPI document cannot drift from what routes answer.
  checkResponses: setting(
    'NODE_ENV',
    z
      .string()
      .optional()
      .transform((v) => v !== 'production'),
    '`production`: the API does not check its response bodies against their schemas (anything else: it does)',
  ),
  workflowBundle: setting(
    'GANTRY_WORKFLOW_BUNDLE',
    z.string().optional(),
    "a prebuilt bundle of the workflow code the workers load (the test runner bundles once for all test files); unset: bundled from source at a worker's start",
  ),
  // Batches and evaluations (issue 43): their model calls go through the gateway as the key's own do.
  batchConcurrencyPerProject: setting(
    'GANTRY_BATCH_CONCURRENCY_PER_PROJECT',
    z.coerce.number().int().positive().default(8),
    "model calls of a project's batches and evaluations in flight at once (the gateway holds more; interactive calls go first)",
  ),
  batchRetentionDays: setting(
    'GANTRY_BATCH_RETENTION_DAYS',
    z.coerce.number().positive().default(7),
    "days a batch's input, output and error files are kept after it ends (the spec: 7)",
  ),
  batchSliceLines: setting(
    'GANTRY_BATCH_SLICE_LINES',
    z.coerce.number().int().positive().default(500),
    'lines of a batch one activity runs (each answer is recorded as it comes; a retried slice redoes only unanswered lines)',
  ),
  batchSlicesPerRun: setting(
    'GANTRY_BATCH_SLICES_PER_RUN',
    z.coerce.number().int().positive().default(40),
    "slices one run of a batch's workflow goes through before it continues as new (its history stays small)",
  ),
} as const satisfies SettingTree;

/** The settings that feed a field computed from more than one (derivedFields). */
const INPUTS = {
  adminKeyFile: setting(
    'GANTRY_ADMIN_KEY_FILE',
    z.string().optional(),
    'where the first start writes the admin API key (mode 0600); default `<data dir>/admin-api-key`',
  ),
  publicUrl: setting(
    'GANTRY_PUBLIC_URL',
    z.url().optional(),
    'where clients reach the API; pre-signed URLs point here (default `http://<host>:<api port>`)',
  ),
  // Every API replica and control worker needs the same one. A value published in this repository's
  // history is refused: anyone could forge URLs and open sealed values with it.
  signingSecret: setting(
    'GANTRY_SIGNING_SECRET',
    rootSecret.optional(),
    'Root of the URL-signing and secret-sealing keys (platform/keyring.ts), each derived from it separately; the same on every API replica and control worker (`./dev up` generates one into `.data/signing-secret`)',
  ),
  previousSigningSecrets: setting(
    'GANTRY_PREVIOUS_SIGNING_SECRETS',
    commaList.pipe(z.array(rootSecret)),
    'Earlier signing secrets after a rotation (comma-separated, newest first): what they sealed and signed still opens until `scripts/reseal.ts` has run',
  ),
  maxSinglePutBytes: setting(
    'GANTRY_MAX_SINGLE_PUT_BYTES',
    z.coerce.number().int().positive().optional(),
    "largest file one pre-signed PUT takes (streamed to storage); larger ones use multipart. Default GANTRY_MAX_UPLOAD_BYTES, so the SDKs' one-PUT flow takes every file the spec allows",
  ),
  temporalAddress: setting(
    'TEMPORAL_ADDRESS',
    z.string().optional(),
    'use an existing Temporal cluster instead (no dev server is started); default: the dev server on `GANTRY_TEMPORAL_PORT`',
  ),
  temporalTls: setting(
    'TEMPORAL_TLS',
    bool.default(false),
    'TLS to Temporal (on too with a client certificate or an API key)',
  ),
  replicaApiUrl: setting(
    'GANTRY_REPLICA_API_URL',
    z.url().optional(),
    'the API as the container host reaches it (default `GANTRY_PUBLIC_URL`); podman replicas reach it (and nothing else) through a forwarder on their bridge, at `GANTRY_BASE_URL`',
  ),
  gatewayUrl: setting(
    'GANTRY_GATEWAY_URL',
    z.url().optional(),
    "the inference gateway as the control worker reaches it, for batches' and evaluations' model calls (default `http://<host>:<gateway port>`)",
  ),
} as const satisfies SettingTree;

/** The fields computed from more than one setting. */
interface DerivedFields {
  adminKeyFile: string;
  publicUrl: string;
  /** The installation's signing and sealing keys; absent when GANTRY_SIGNING_SECRET is not set. */
  keyring?: Keyring;
  maxSinglePutBytes: number;
  blobDir: string;
  /** True when TEMPORAL_ADDRESS points at an existing cluster (no dev server is started). */
  externalTemporal: boolean;
  temporal: TemporalSettings & {
    tlsCertPath?: string;
    tlsKeyPath?: string;
    tlsServerName?: string;
    tlsEnabled: boolean;
  };
  replicaApiUrl: string;
  clusterSettings: ClusterSettings;
  gatewayUrl: string;
}

type Fields = Parsed<typeof FIELDS>;

function derivedFields(f: Fields, i: Parsed<typeof INPUTS>): DerivedFields {
  const localUrl = `http://${f.host}:${f.apiPort}`;
  return {
    adminKeyFile: path.resolve(i.adminKeyFile ?? path.join(f.dataDir, 'admin-api-key')),
    publicUrl: (i.publicUrl ?? localUrl).replace(/\/+$/, ''),
    keyring: i.signingSecret ? new Keyring(i.signingSecret, i.previousSigningSecrets) : undefined,
    maxSinglePutBytes: i.maxSinglePutBytes ?? f.maxUploadBytes,
    blobDir: path.resolve(f.dataDir, 'blobs'),
    externalTemporal: Boolean(i.temporalAddress),
    temporal: {
      ...f.temporal,
      address: i.temporalAddress ?? `127.0.0.1:${f.temporalPort}`,
      tlsEnabled: i.temporalTls || Boolean(f.temporal.tlsCertPath) || Boolean(f.temporal.apiKey),
    },
    replicaApiUrl: i.replicaApiUrl ?? i.publicUrl ?? localUrl,
    clusterSettings: { ...f.clusterSettings, gpuQueueWaitSeconds: f.gpuQueueWaitSeconds },
    gatewayUrl: (i.gatewayUrl ?? `http://${f.host}:${f.gatewayPort}`).replace(/\/+$/, ''),
  };
}

export type GantryConfig = Simplify<Omit<Fields, keyof DerivedFields> & DerivedFields>;

/**
 * Every setting, in declaration order (for the configuration page, scripts/lib/configuration-page.ts).
 * @public
 */
export const SETTINGS: readonly Setting[] = [...leaves(FIELDS), ...leaves(INPUTS)];

function leaves(tree: SettingTree): Setting[] {
  return Object.values(tree).flatMap((node) => (isSetting(node) ? [node] : leaves(node)));
}

function isSetting(node: Setting | SettingTree): node is Setting {
  return typeof node.variable === 'string' && node.schema instanceof z.ZodType;
}

/** Each setting's value, placed at its field. */
function valuesOf<T extends SettingTree>(tree: T, parsed: Record<string, unknown>): Parsed<T> {
  return Object.fromEntries(
    Object.entries(tree).map(([field, node]) => [
      field,
      isSetting(node) ? parsed[node.variable] : valuesOf(node, parsed),
    ]),
  ) as Parsed<T>;
}

const EnvSchema = z.object(Object.fromEntries(SETTINGS.map((s) => [s.variable, s.schema])));

/** Every environment variable Gantry's configuration reads (a deployment file setting another is a typo). */
export const CONFIG_VARIABLES: ReadonlySet<string> = new Set(SETTINGS.map((s) => s.variable));

export class ConfigError extends Error {}

/** Each default a replica gets must be within the ceilings every replica is held to. */
function defaultsAboveCeilings(f: Fields): string[] {
  const limits = ['cpus', 'memoryGiB', 'storageGiB'] as const;
  return limits
    .filter((limit) => f.replicaDefaultLimits[limit] > f.replicaMaxLimits[limit])
    .map((limit) => {
      const [d, max] = [FIELDS.replicaDefaultLimits[limit].variable, FIELDS.replicaMaxLimits[limit].variable];
      return `  ${d}: ${f.replicaDefaultLimits[limit]} is more than ${max} (${f.replicaMaxLimits[limit]})`;
    });
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): GantryConfig {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid environment:\n${lines.join('\n')}`);
  }
  const fields = valuesOf(FIELDS, parsed.data);
  const above = defaultsAboveCeilings(fields);
  if (above.length) throw new ConfigError(`Invalid environment:\n${above.join('\n')}`);
  return { ...fields, ...derivedFields(fields, valuesOf(INPUTS, parsed.data)) };
}

export function requireDatabaseUrl(config: GantryConfig): string {
  if (!config.databaseUrl) {
    throw new ConfigError(
      'DATABASE_URL is not set. Start the whole platform with `./dev up` (embedded PostgreSQL), or point DATABASE_URL at a PostgreSQL server.',
    );
  }
  return config.databaseUrl;
}

/** Variables a child process inherits by exact name. */
const INHERITED = new Set([
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'TZ',
  'TMPDIR',
  'LD_LIBRARY_PATH',
  'VIRTUAL_ENV',
]);

/** Variables a child process inherits by prefix: locale, Python, the numeric and accelerator runtimes, model caches. */
const INHERITED_PREFIXES = [
  'LC_',
  'PYTHON',
  'JAX_',
  'XLA_',
  'CUDA_',
  'NVIDIA_',
  'NCCL_',
  'TORCH_',
  'OMP_',
  'MKL_',
  'OPENBLAS_',
  'HF_',
  'TRANSFORMERS_',
];

/**
 * What of this process's environment the programs Gantry runs (trainers, the speech tools, ffmpeg,
 * zstd, process replicas) inherit: what they need to run, and none of Gantry's own settings. A child
 * that inherited process.env would hold the database URL with its password, the signing secret and
 * the Temporal address, and a trainer or recognizer runs code and models that came from users. An
 * allowlist, so a secret added to the settings later is not passed on by default. Not settings:
 * Gantry passes these on, and reads of them (PATH to find a binary, PYTHONPATH to extend) read this.
 */
export function inheritedEnvironment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined) continue;
    if (INHERITED.has(name) || INHERITED_PREFIXES.some((p) => name.startsWith(p))) env[name] = value;
  }
  return env;
}
