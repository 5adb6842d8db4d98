/**
 * Speech requests (`POST /v1/audio/transcriptions`, `/v1/audio/translations`): the request checked
 * against the served models, its workflow `audio/<request-id>` started on the `speech` task queue
 * and its result awaited within the request, shaped as the caller asked; the workflow's failures as
 * the spec's errors.
 */
import { createHash } from 'node:crypto';
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowNotFoundError,
  type WorkflowHandle,
} from '@temporalio/client';
import { ActivityFailure, ApplicationFailure, TimeoutFailure, TimeoutType } from '@temporalio/common';
import type { z } from 'zod';
import type { Principal } from '../../db/accounts';
import { newId } from '../../platform/ids';
import {
  AUDIO_FAILURES,
  audioWorkflowId,
  findSpeechModel,
  TRANSLATION_TARGETS,
  type AudioRequestInput,
  type AudioResult,
  type AudioTask,
} from '../../shared/audio';
import { audioRequest } from '../../workflows/audio';
import type { ApiDeps } from '../deps';
import { ApiError, badRequest, notFound, serviceUnavailable } from '../errors';
import type { TranscriptionBody as TranscriptionBodySchema } from '../schemas/audio';
import type { ServedSpeechModels } from '../speech-models';
import type { StoredUpload } from '../uploads/blob-storage-engine';
import type { WorkTag } from '../../shared/work-tag';
import { startResourceWorkflowOrUndo } from '../workflows';

type TranscriptionBody = z.infer<typeof TranscriptionBodySchema>;

/**
 * The id of a speech request: new for a user's, and for a batch line's derived from its batch and
 * call key, so the line asked again finds the request it made before (requestAudio).
 */
export function audioRequestId(work: WorkTag | undefined, workCallKey: string | undefined): string {
  if (!work || workCallKey === undefined) return newId('audio');
  const digest = createHash('sha256').update(`${work.kind}/${work.id}/${workCallKey}`).digest('hex');
  return `audio-${digest.slice(0, 8)}-${digest.slice(8, 12)}-${digest.slice(12, 16)}-${digest.slice(16, 20)}-${digest.slice(20, 32)}`;
}

/** Whether a run of this workflow id exists, running or ended. */
async function runExists(handle: WorkflowHandle): Promise<boolean> {
  try {
    await handle.describe();
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/** Runs one speech request to its answer, shaped as `body.response_format` asks. */
export async function requestAudio(
  deps: Pick<ApiDeps, 'temporal' | 'blobs' | 'config'>,
  speechModels: ServedSpeechModels,
  principal: Pick<Principal, 'projectId' | 'apiKeyId' | 'work'>,
  task: AudioTask,
  body: TranscriptionBody,
  upload: { stored?: StoredUpload; requestId?: string },
  /** A batch line's call key (`x-gantry-work-call`): the request is made once for it (audioRequestId). */
  workCallKey: string | undefined,
  /** Told the request's id and model once they are known, before its workflow starts (the route's headers). */
  announce: (requestId: string, modelId: string) => void,
) {
  const { temporal, blobs, config } = deps;
  const { projectId, apiKeyId, work } = principal;
  const { stored } = upload;
  const modelId = body.model ?? (await speechModels.defaultModel());
  const model = await speechModels.find(modelId);
  if (!model) {
    const served = (await speechModels.list()).map((m) => m.id).join(', ');
    throw notFound(
      findSpeechModel(modelId)
        ? `No speech host of this installation has ${modelId} now (its operator provides its weights); it serves ${served}.`
        : `No speech model '${modelId}' on this installation; it serves ${served}.`,
      'model_not_found',
    );
  }
  let source: AudioRequestInput['source'];
  if (stored) source = { blobKey: stored.blobKey };
  else if (body.file && /^https?:\/\//i.test(body.file)) source = { url: body.file };
  else throw badRequest('file is required: the audio as a binary upload, or a public http(s) URL.', 'file');
  const language = body.language?.toLowerCase();
  if (language !== undefined && language !== 'auto' && !/^[a-z]{2}$/.test(language))
    throw badRequest('language is an ISO 639-1 code (two letters) or auto.', 'language');
  if (task === 'translate') {
    if (!model.translates) throw badRequest(`${model.id} cannot translate; use openai/whisper-base.`, 'model');
    if (language && language !== 'en' && language !== 'auto' && !TRANSLATION_TARGETS[language])
      throw badRequest(
        `Translations are into English, or on from English into ${Object.keys(TRANSLATION_TARGETS).join(', ')}; not '${language}'.`,
        'language',
      );
  } else if (language && language !== 'auto' && model.languages && !model.languages.includes(language)) {
    throw badRequest(`${model.id} recognizes ${model.languages.join(', ')} only.`, 'language');
  }
  if (body.min_speakers !== undefined && body.max_speakers !== undefined && body.min_speakers > body.max_speakers)
    throw badRequest('min_speakers must not exceed max_speakers.', 'min_speakers');

  const requestId = upload.requestId ?? audioRequestId(work, workCallKey);
  const handle = temporal.workflow.getHandle(audioWorkflowId(requestId));
  const input: AudioRequestInput = {
    requestId,
    projectId,
    task,
    model: model.id,
    source,
    // For translation `language` names the target (English when left out): the spoken language is detected.
    language: task === 'transcribe' && language && language !== 'auto' ? language : undefined,
    targetLanguage: task === 'translate' && language && TRANSLATION_TARGETS[language] ? language : undefined,
    prompt: body.prompt,
    temperature: body.temperature,
    diarize: body.diarize,
    minSpeakers: body.min_speakers,
    maxSpeakers: body.max_speakers,
    chunkSeconds: config.audioChunkSeconds,
    heartbeatSeconds: config.audioHeartbeatTimeoutSeconds,
    hostWaitSeconds: config.audioHostWaitSeconds,
    ...(work ? { work } : {}),
  };
  announce(requestId, model.id);
  // A batch line asked again (its worker was lost mid-call) joins the request it made before, running
  // or ended, instead of transcribing the audio twice; this asking's own upload is not needed then.
  const joined = workCallKey !== undefined && (await runExists(handle));
  let joinedRunning = false;
  if (!joined)
    await startResourceWorkflowOrUndo(
      temporal,
      {
        workflow: audioRequest,
        workflowId: audioWorkflowId(requestId),
        args: [input],
        projectId,
        resourceType: 'audio',
        resourceId: requestId,
        status: 'RUNNING',
        summary: `${task === 'translate' ? 'Translation' : 'Transcription'} with ${model.id}${body.diarize ? ', diarized' : ''}`,
        details: `Requested by API key \`${apiKeyId}\`; audio ${'url' in source ? `from ${new URL(source.url).host}` : 'uploaded'}.`,
      },
      async () => {
        if (stored) await blobs.delete(stored.blobKey);
      },
    ).catch((err: unknown) => {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError && workCallKey !== undefined)) throw err;
      joinedRunning = true; // the same line asked twice at once: the first one's run answers both
    });
  let result: AudioResult;
  try {
    result = await handle.result();
  } catch (err) {
    throw audioFailure(err, input);
  } finally {
    // The run that answered keeps (and discards) its own upload; a joining asking's copy, written to
    // the same key after it, goes once that run has ended.
    if ((joined || joinedRunning) && stored) await blobs.delete(stored.blobKey);
  }
  // A translation's `language` is its target (the SDKs' "target language of the translation"), not the one spoken.
  return shape(task === 'translate' ? { ...result, language: input.targetLanguage ?? 'en' } : result, body);
}

/** The response in the requested format: json is the text; verbose_json adds what was asked for. */
function shape(r: AudioResult, body: TranscriptionBody) {
  if (body.response_format === 'json') return { text: r.text };
  const granularities = body.timestamp_granularities ?? ['segment'];
  return {
    task: r.task,
    language: r.language,
    duration: r.duration,
    text: r.text,
    segments: granularities.includes('segment') ? r.segments : [],
    ...(granularities.includes('word') || body.diarize ? { words: r.words } : {}),
    ...(r.speaker_segments ? { speaker_segments: r.speaker_segments } : {}),
  };
}

/** The workflow's failure as the spec's error. */
function audioFailure(err: unknown, input: AudioRequestInput): unknown {
  const cause = err instanceof WorkflowFailedError ? err.cause : undefined;
  // No speech host took the work: the hosts that serve the model went away (or all are busy).
  if (
    cause instanceof ActivityFailure &&
    cause.cause instanceof TimeoutFailure &&
    cause.cause.timeoutType === TimeoutType.SCHEDULE_TO_START
  )
    return serviceUnavailable(
      `No speech host serving ${input.model} took this request within ${input.hostWaitSeconds} s; retry later.`,
      30,
    );
  const failure =
    cause instanceof ApplicationFailure ? cause : cause?.cause instanceof ApplicationFailure ? cause.cause : undefined;
  if (!failure) return err;
  switch (failure.type) {
    case AUDIO_FAILURES.tooLong:
      return badRequest(failure.message, 'file', 'audio_too_long');
    case AUDIO_FAILURES.undecodable:
      return badRequest(failure.message, 'file', 'audio_undecodable');
    case AUDIO_FAILURES.tooLarge:
      return new ApiError(413, failure.message, 'request_too_large', 'file', 'request_too_large');
    case AUDIO_FAILURES.unreachable:
      return badRequest(failure.message, 'file', 'audio_url_unreachable');
    case AUDIO_FAILURES.invalid:
      return badRequest(failure.message, null, 'invalid_request');
    case AUDIO_FAILURES.translationUnavailable:
      return serviceUnavailable(`${failure.message} Its operator installs it; retry later.`, 30);
  }
  return err;
}
