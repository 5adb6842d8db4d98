/**
 * Building blocks shared by the worker processes and by tests: the Temporal
 * runtime (logs into pino), the connection, and the control and GPU workers
 * themselves (workflow code comes from workflow-code.ts).
 */
import { hostname } from 'node:os';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import type { GantryConfig } from '../platform/config';
import type { Keyring } from '../platform/keyring';
import type { Logger } from '../platform/logger';
import { retryUntilReady } from '../platform/lifecycle';
import { temporalConnectionOptions } from '../platform/temporal';
import { workflowSource } from './workflow-code';
import type { GpuType } from '../shared/gpu-types';
import type { Db } from '../db/pool';
import { projectExists } from '../db/accounts';
import type { AcceleratorHost } from '../providers/accelerator/host';
import { createAcceleratorActivities } from '../activities/accelerator';
import { createFileActivities } from '../activities/files';
import { createFineTuneActivities, createTrainingActivities } from '../activities/fine-tunes';
import { TrainingSlots } from '../providers/accelerator/training-slots';
import { createModelRegistryActivities } from '../activities/models';
import { createModelUploadActivities } from '../activities/model-uploads';
import { createModelFileUploadActivities } from '../activities/model-file-uploads';
import { createAdapterControlActivities, createAdapterHostActivities } from '../activities/adapters';
import { createRolloutActivities } from '../activities/rollouts';
import { createUsageActivities } from '../activities/usage';
import { createSpeechActivities, type SpeechDeps } from '../activities/audio';
import type { RemoteFetchPolicy } from '../platform/config';
import { createSystemActivities } from '../activities/system';
import type { ModelCallDeps } from '../activities/model-calls';
import { createBatchActivities } from '../activities/batches';
import { createEvaluationActivities } from '../activities/evaluations';
import { createClusterActivities, createClusterNodeTestActivities } from '../activities/clusters';
import { createQueueActivities } from '../activities/queue';
import { createDeploymentControlActivities, createReplicaActivities } from '../activities/deployments';
import { containerHostQueue, CONTAINERS_TASK_QUEUE } from '../shared/deployments';
import type { ContainerRuntime } from '../providers/containers/runtime';
import type { VolumeStore } from '../providers/containers/volume-store';
import type { AdapterFiles } from '../providers/containers/adapter-files';
import type { ComputeProvider } from '../providers/compute/compute';
import type { BlobStore } from '../providers/storage/blob-store';
import type { Trainers } from '../providers/trainer/process-trainer';
import { CONTROL_TASK_QUEUE, recognitionTaskQueue, SPEECH_TASK_QUEUE, gpuTaskQueue } from '../shared/task-queues';
import type { SpeechModel } from '../shared/audio';

/**
 * Sends the Temporal SDK's own logs through pino, so every line is structured;
 * with a metrics port, the SDK serves its Prometheus metrics there (workflow
 * and activity task latencies, activity outcomes such as
 * `temporal_activity_execution_failed`, poller and slot gauges).
 */
/** Seconds a worker still waits, after cancelling its activities, for those that ignore the cancellation. */
const SHUTDOWN_FORCE_AFTER_GRACE_SECONDS = 30;

/**
 * How every worker shuts down. In-flight activities get the grace to finish; then they are
 * cancelled and Temporal retries them on another worker. One that ignores its cancellation (stuck
 * in I/O that never ends) does not hold the process forever: the worker stops anyway, and the
 * server's heartbeat or start-to-close timeout hands the task on.
 */
function shutdownTimes(graceSeconds: number) {
  return {
    shutdownGraceTime: `${graceSeconds} seconds`,
    shutdownForceTime: `${graceSeconds + SHUTDOWN_FORCE_AFTER_GRACE_SECONDS} seconds`,
  } as const;
}

export function installRuntime(logger: Logger, metrics?: { host: string; port?: number }): void {
  Runtime.install({
    ...(metrics?.port
      ? { telemetryOptions: { metrics: { prometheus: { bindAddress: `${metrics.host}:${metrics.port}` } } } }
      : {}),
    logger: new DefaultLogger('INFO', (entry) => {
      const level = entry.level.toLowerCase() as 'trace' | 'debug' | 'info' | 'warn' | 'error';
      logger[level]({ sdk: entry.meta }, entry.message);
    }),
  });
}

export function connectWorkerConnection(config: GantryConfig, logger: Logger): Promise<NativeConnection> {
  return retryUntilReady(
    `Temporal at ${config.temporal.address}`,
    () => NativeConnection.connect(temporalConnectionOptions(config.temporal)),
    logger,
  );
}

interface CommonWorkerDeps {
  connection: NativeConnection;
  namespace: string;
  shutdownGraceSeconds: number;
}

export function createControlWorker(
  deps: CommonWorkerDeps & {
    db: Db;
    blobs: BlobStore;
    fleet: ComputeProvider;
    /** What model uploads may fetch (default: public hosts only, 500 GiB). */
    remoteFetch?: RemoteFetchPolicy;
    /** GANTRY_PROJECT_STORAGE_QUOTA_BYTES, for model imports (default 0: no quota). */
    storageQuotaBytes?: number;
    keyring?: Keyring;
    /** Where batches and evaluations make their model calls (the API, the gateway); their keyring is `keyring`. */
    modelCalls?: Omit<ModelCallDeps, 'keyring'>;
    /** GANTRY_BATCH_CONCURRENCY_PER_PROJECT: lines of a batch in flight at once (default 8). */
    batchConcurrency?: number;
  },
): Promise<Worker> {
  return Worker.create({
    connection: deps.connection,
    namespace: deps.namespace,
    taskQueue: CONTROL_TASK_QUEUE,
    identity: `control@${hostname()}:${process.pid}`,
    ...workflowSource(),
    activities: {
      ...createSystemActivities({ db: deps.db }),
      ...createFileActivities({ db: deps.db, blobs: deps.blobs }),
      ...createFineTuneActivities({ db: deps.db, blobs: deps.blobs }),
      ...createModelRegistryActivities({ db: deps.db, blobs: deps.blobs }),
      ...createModelFileUploadActivities({ db: deps.db, blobs: deps.blobs }),
      ...createModelUploadActivities({
        db: deps.db,
        blobs: deps.blobs,
        policy: deps.remoteFetch ?? { allowPrivateHosts: false, maxBytes: 500 * 1024 ** 3 },
        keyring: deps.keyring,
        storageQuotaBytes: deps.storageQuotaBytes ?? 0,
      }),
      ...createClusterActivities({ db: deps.db, fleet: deps.fleet }),
      ...createQueueActivities({ db: deps.db }),
      ...createDeploymentControlActivities({ db: deps.db }),
      ...createAdapterControlActivities({ db: deps.db }),
      ...createRolloutActivities({ db: deps.db }),
      ...createUsageActivities({ db: deps.db }),
      ...createBatchActivities({
        db: deps.db,
        blobs: deps.blobs,
        keyring: deps.keyring,
        modelCalls: deps.modelCalls,
        concurrency: deps.batchConcurrency ?? 8,
      }),
      ...createEvaluationActivities({
        db: deps.db,
        blobs: deps.blobs,
        keyring: deps.keyring,
        modelCalls: deps.modelCalls,
        remoteFetch: deps.remoteFetch ?? { allowPrivateHosts: false, maxBytes: 500 * 1024 ** 3 },
      }),
    },
    ...shutdownTimes(deps.shutdownGraceSeconds),
  });
}

/**
 * One activity-only worker per accelerator type this host serves. Training
 * writes its progress to PostgreSQL and its weights to the blob store, so a
 * GPU host needs both, like a control worker.
 */
export function createGpuWorkers(
  deps: CommonWorkerDeps & {
    gpuTypes: GpuType[];
    host: AcceleratorHost;
    db: Db;
    blobs: BlobStore;
    /** The trainers this host has: kind -> the Python that runs it. */
    trainers: Trainers;
    /** The host's model directory (config `modelDir`): base weights the torch trainer reads. */
    modelDir: string;
    workDir: string;
    /** A trainer silent this long is hung: killed, and its attempt retried from the last checkpoint. */
    trainerStallSeconds: number;
    /** Trainers this host runs at once. */
    trainingSlots: number;
    /** The fleet whose nodes this host's worker tests (acceptance, NCCL, health). */
    fleet: ComputeProvider;
  },
): Promise<Worker[]> {
  const activities = {
    ...createAcceleratorActivities({ host: deps.host }),
    ...createTrainingActivities({
      db: deps.db,
      blobs: deps.blobs,
      trainers: deps.trainers,
      modelDir: deps.modelDir,
      workDir: deps.workDir,
      stallSeconds: deps.trainerStallSeconds,
      slots: new TrainingSlots(deps.trainingSlots),
    }),
    ...createClusterNodeTestActivities({ fleet: deps.fleet }),
  };
  return Promise.all(
    deps.gpuTypes.map((gpuType) =>
      Worker.create({
        connection: deps.connection,
        namespace: deps.namespace,
        taskQueue: gpuTaskQueue(gpuType),
        identity: `gpu(${gpuType}, ${deps.host.kind})@${hostname()}:${process.pid}`,
        activities,
        ...shutdownTimes(deps.shutdownGraceSeconds),
        // Cancellation reaches an activity in a heartbeat response: heartbeat often,
        // so a cancelled training run stops within about a second.
        maxHeartbeatThrottleInterval: '1 second',
        // Trainings beyond the host's slots wait on it (TrainingSlots); taking only a few more tasks
        // than that (room for probes and node tests: the host's checkSlots) leaves the rest queued
        // for other hosts.
        maxConcurrentActivityTaskExecutions: deps.trainingSlots + deps.host.checkSlots,
      }),
    ),
  );
}

/**
 * A speech host: transcription and translation activities (activities/audio.ts), running the
 * speech environment's Python tools. It polls queue `speech` (decoding, diarization, cleanup, and
 * the models shipped on PyPI), and the queue of each model its model directory holds
 * (recognitionTaskQueue), so only hosts that have a model get its chunks.
 */
export function createSpeechWorkers(
  deps: CommonWorkerDeps & SpeechDeps & { operatorModels: SpeechModel[] },
): Promise<Worker[]> {
  // One set of activities, so the tools' slots are shared by all of this host's queues.
  const activities = createSpeechActivities(deps);
  const queues = [SPEECH_TASK_QUEUE, ...deps.operatorModels.map(recognitionTaskQueue)];
  return Promise.all(
    queues.map((taskQueue) =>
      Worker.create({
        connection: deps.connection,
        namespace: deps.namespace,
        taskQueue,
        identity: `speech@${hostname()}:${process.pid}`,
        activities,
        ...shutdownTimes(deps.shutdownGraceSeconds),
        // Held tasks beyond the tools' slots would only wait here while another host could run them.
        maxConcurrentActivityTaskExecutions: deps.slots,
        maxHeartbeatThrottleInterval: '2 seconds',
      }),
    ),
  );
}

/**
 * A container host: launches replicas (queue `containers`) and supervises the
 * ones it launched on its own queue, `containers@<host>`, so a replica is
 * always watched by the process that holds it.
 */
export async function createContainerWorkers(
  deps: CommonWorkerDeps & {
    db: Db;
    runtime: ContainerRuntime;
    volumes: VolumeStore;
    adapters: AdapterFiles;
    keyring?: Keyring;
    replicaAdoptionSeconds: number;
    /** GANTRY_MODEL_DIR (catalog models' weights, for their model servers' replicas). */
    modelDir: string;
    /** The host's stable name (host-identity.ts); absent: this process is a new host. */
    hostId?: string;
    /**
     * A shutdown leaves the replicas running for the next process of this host (an operator named it:
     * GANTRY_CONTAINER_HOST_ID) instead of stopping them. Without it, only a crash leaves them.
     */
    restartsInPlace?: boolean;
  },
): Promise<Worker[]> {
  const hostQueue = containerHostQueue(
    deps.hostId ?? `${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`,
  );
  // Replicas an earlier worker process of this host left running, taken over before any run asks,
  // and those of this installation that a host that is gone left on the machine (stopped).
  const survivors = await deps.runtime.adoptSurvivors({ isOurProject: (id) => projectExists(deps.db, id) });
  const activities = {
    ...createReplicaActivities({
      db: deps.db,
      runtime: deps.runtime,
      survivors,
      volumes: deps.volumes,
      adapters: deps.adapters,
      modelDir: deps.modelDir,
      hostQueue,
      keyring: deps.keyring,
      adoptionSeconds: deps.replicaAdoptionSeconds,
      restartsInPlace: deps.restartsInPlace ?? deps.hostId !== undefined,
    }),
    ...createAdapterHostActivities({ db: deps.db, adapters: deps.adapters, hostQueue }),
  };
  return Promise.all(
    [CONTAINERS_TASK_QUEUE, hostQueue].map((taskQueue) =>
      Worker.create({
        connection: deps.connection,
        namespace: deps.namespace,
        taskQueue,
        identity: `containers(${deps.runtime.kind})@${hostname()}:${process.pid}`,
        activities,
        ...shutdownTimes(deps.shutdownGraceSeconds),
        // Cancellation (stop a replica) arrives with a heartbeat response.
        maxHeartbeatThrottleInterval: '1 second',
      }),
    ),
  );
}
