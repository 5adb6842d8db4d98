/**
 * A speech worker: transcription and translation activities on queue
 * `speech` (shared/task-queues.ts), running the speech environment's tools
 * (GANTRY_SPEECH_PYTHON; `./dev` installs `.venv-speech`). Start one on every
 * host that should recognize speech; more hosts mean more chunks in parallel,
 * and a host lost mid-request has its chunks retried on another. Whisper
 * models the operator put in GANTRY_SPEECH_MODEL_DIR are served from this host
 * too, each on its own queue.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { hostname } from 'node:os';
import { loadConfig, requireDatabaseUrl } from '../platform/config';
import { createPool } from '../db/pool';
import { SpeechHostAnnouncer } from '../providers/speech/host-announcer';
import { exitOnStartupError, ownerOnlyFiles } from '../platform/lifecycle';
import { createLogger } from '../platform/logger';
import { FilesystemBlobStore } from '../providers/storage/filesystem';
import { connectWorkerConnection, createSpeechWorkers, installRuntime } from './runtime';
import { readSpeechModelDirectory } from '../providers/speech/model-directory';
import { SPEECH_MODELS } from '../shared/audio';
import { recognitionTaskQueue, SPEECH_TASK_QUEUE } from '../shared/task-queues';

async function main() {
  ownerOnlyFiles();
  const config = loadConfig();
  const logger = createLogger('worker-speech', config.logLevel);
  installRuntime(logger, { host: config.host, port: config.metricsPort });
  if (!existsSync(config.speechPython))
    throw new Error(
      `No speech environment at ${config.speechPython}: run ./dev up (it installs .venv-speech), or set GANTRY_SPEECH_PYTHON.`,
    );
  const directory = config.speechModelDir ? readSpeechModelDirectory(config.speechModelDir) : undefined;
  for (const { entry, reason } of directory?.ignored ?? [])
    logger.warn({ modelDir: config.speechModelDir, entry }, `speech model directory entry not served: ${reason}`);
  const operatorModels = directory?.served ?? [];
  const connection = await connectWorkerConnection(config, logger);
  const workers = await createSpeechWorkers({
    connection,
    namespace: config.temporal.namespace,
    shutdownGraceSeconds: config.workerShutdownGraceSeconds,
    blobs: new FilesystemBlobStore(config.blobDir),
    speechPython: config.speechPython,
    slots: config.speechSlots,
    workDir: path.join(config.dataDir, 'speech'),
    remoteFetch: config.remoteFetch,
    modelDir: config.speechModelDir,
    operatorModels,
  });
  // The models of the operator's directory are announced while this host runs (db/speech-hosts.ts),
  // so the API lists them; a host with none needs no database.
  const announcer = operatorModels.length
    ? await SpeechHostAnnouncer.start(
        createPool(requireDatabaseUrl(config), 2),
        `${hostname()}:${process.pid}`,
        operatorModels.map((m) => m.id),
        logger,
      )
    : undefined;
  // Withdrawn as soon as the host is told to stop, not after its last chunks finish: no new work comes.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void announcer?.stop());
  logger.info(
    {
      taskQueues: [SPEECH_TASK_QUEUE, ...operatorModels.map(recognitionTaskQueue)],
      models: [...SPEECH_MODELS, ...operatorModels].map((m) => m.id),
      speechPython: config.speechPython,
    },
    'speech worker polling',
  );
  await Promise.all(workers.map((w) => w.run()));
  await announcer?.stop();
  await connection.close();
  logger.info('speech worker stopped');
}

main().catch(exitOnStartupError(createLogger('worker-speech')));
