/**
 * audioRequest (`audio/<request-id>`): one transcription or translation. The
 * audio is fetched and decoded once (prepareAudio), cut at pauses into chunks
 * that are recognized as separate activities in parallel (their timings come
 * back global; a model an operator provided is recognized on its own queue,
 * served only by the speech hosts that have it), optionally diarized, and
 * assembled into the response, which
 * is the workflow's result: the API waits for it within the HTTP request. A
 * worker lost mid-chunk is retried on another by Temporal (heartbeat timeout);
 * the client sees only latency. What the request stored is removed at the end.
 */
import {
  ApplicationFailure,
  isCancellation,
  patched,
  proxyActivities,
  setCurrentDetails,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { statusSearchAttributes } from '../shared/search-attributes';
import { PATCHES } from './patches';
import type { SpeechActivities } from '../activities/audio';
import type { UsageActivities } from '../activities/usage';
import {
  assembleResult,
  AUDIO_FAILURES,
  findSpeechModel,
  type AudioRequestInput,
  type AudioResult,
} from '../shared/audio';
import { CONTROL_TASK_QUEUE, recognitionTaskQueue, SPEECH_TASK_QUEUE } from '../shared/task-queues';

const usage = proxyActivities<UsageActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

/** GantryStatus/GantryPhase say how the request ended. (Before this patch they kept RUNNING.) */
const searchableEnd = (status: 'COMPLETED' | 'FAILED') => {
  if (patched(PATCHES.audioFinalStatus.id)) upsertSearchAttributes(statusSearchAttributes(status));
};

export async function audioRequest(input: AudioRequestInput): Promise<AudioResult> {
  const speechOn = (taskQueue: string) =>
    proxyActivities<SpeechActivities>({
      taskQueue,
      startToCloseTimeout: '30 minutes',
      // A speech host that dies stops heartbeating: its chunk goes to another host after this.
      heartbeatTimeout: `${input.heartbeatSeconds ?? 20} seconds`,
      // No speech host (with the model) is an error the caller should get, not a wait forever.
      scheduleToStartTimeout: `${input.hostWaitSeconds ?? 120} seconds`,
      retry: { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 4 },
    });
  const speech = speechOn(SPEECH_TASK_QUEUE);
  const model = findSpeechModel(input.model);
  if (!model) throw ApplicationFailure.nonRetryable(`Unknown speech model ${input.model}.`, AUDIO_FAILURES.invalid);
  // A model an operator provided is recognized only on the hosts that have it (its own queue);
  // decoding, diarization and cleanup run on any speech host.
  const recognizer = speechOn(recognitionTaskQueue(model));
  const stored: string[] = 'blobKey' in input.source ? [input.source.blobKey] : [];
  try {
    setCurrentDetails('Decoding the audio.');
    const prepared = await speech.prepareAudio({
      requestId: input.requestId,
      projectId: input.projectId,
      source: input.source,
      chunkSeconds: input.chunkSeconds,
    });
    stored.push(prepared.decodedKey);
    setCurrentDetails(`${prepared.duration.toFixed(1)} s of audio in ${prepared.chunks.length} chunk(s).`);
    const [chunks, turns] = await Promise.all([
      Promise.all(
        prepared.chunks.map(([start, end]) =>
          recognizer.transcribeChunk({
            requestId: input.requestId,
            decodedKey: prepared.decodedKey,
            start,
            end,
            backend: model.backend,
            task: input.task,
            language: input.language,
            targetLanguage: input.targetLanguage,
            prompt: input.prompt,
            temperature: input.temperature,
          }),
        ),
      ),
      input.diarize
        ? speech.diarizeAudio({
            requestId: input.requestId,
            decodedKey: prepared.decodedKey,
            minSpeakers: input.minSpeakers,
            maxSpeakers: input.maxSpeakers,
          })
        : Promise.resolve(undefined),
    ]);
    // Added after the first requests ran: histories recorded before it replay without the step.
    if (patched(PATCHES.audioUsage.id)) {
      await usage.recordAudioUsage({
        requestId: input.requestId,
        projectId: input.projectId,
        model: input.model,
        task: input.task,
        durationSeconds: prepared.duration,
        work: input.work,
      });
    }
    const result = assembleResult(chunks, { duration: prepared.duration, task: input.task, turns });
    searchableEnd('COMPLETED');
    return result;
  } catch (err) {
    if (!isCancellation(err)) searchableEnd('FAILED');
    throw err;
  } finally {
    await speech.discardAudio({ requestId: input.requestId, keys: stored });
  }
}
