/**
 * Speech (`POST /v1/audio/transcriptions`, `/v1/audio/translations`, the
 * official SDK's `audio.transcriptions` / `audio.translations`): multipart
 * with the audio as a binary `file` (streamed into the blob store as it
 * arrives, after the fields before it; at most 80 MB, else 413 at once) or as
 * a public URL the speech worker fetches (at most 1 GB). Each request is the
 * workflow `audio/<request-id>` on the `speech` task queue; the response is
 * its result, awaited within the request. The request id is in the
 * `X-Gantry-Audio-Request` header, the model that answered (a request may
 * leave it out) in `X-Gantry-Speech-Model`.
 */
import { WorkflowFailedError } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure, TimeoutFailure, TimeoutType } from '@temporalio/common';
import type { NextFunction, Request, Response } from 'express';
import multer from 'multer';
import { type z } from 'zod';
import {
  AUDIO_FAILURES,
  AUDIO_LIMITS,
  audioWorkflowId,
  findSpeechModel,
  TRANSLATION_TARGETS,
  type AudioRequestInput,
  type AudioResult,
  type AudioTask,
} from '../../shared/audio';
import { newId } from '../../platform/ids';
import type { WorkTag } from '../../shared/work-tag';
import { audioRequest } from '../../workflows/audio';
import { BlobStorageEngine, type StoredUpload } from '../uploads/blob-storage-engine';
import type { ApiDeps } from '../deps';
import { ApiError, badRequest, notFound, serviceUnavailable } from '../errors';
import type { ApiRouter } from '../route';
import type { ServedSpeechModels } from '../speech-models';
import { TranscriptSchema } from '../schemas/audio';
import { startResourceWorkflowOrUndo } from '../workflows';
import { TranscriptionFields, TranscriptionBody } from '../schemas/audio';

const tooLarge = () =>
  new ApiError(
    413,
    `Audio uploads may be at most ${AUDIO_LIMITS.uploadBytes / (1024 * 1024)} MB; send a URL for larger files (up to 1 GB).`,
    'request_too_large',
    'file',
    'request_too_large',
    // The rest of the body is not read: the connection closes after this answer.
    { Connection: 'close' },
  );

type TranscriptionBody = z.infer<typeof TranscriptionBody>;

export function addAudioRoutes(router: ApiRouter, deps: ApiDeps, speechModels: ServedSpeechModels) {
  const { temporal, blobs, config } = deps;
  const upload = multer({
    storage: new BlobStorageEngine(blobs, AUDIO_LIMITS.uploadBytes, (req) => {
      const id = newId('audio');
      (req as Request & { audioRequestId?: string }).audioRequestId = id;
      return { id, key: `audio/${req.principal!.projectId}/${id}/upload` };
    }),
    limits: { fileSize: AUDIO_LIMITS.uploadBytes, files: 1, fields: 16, fieldSize: 8192, parts: 20 },
  }).single('file');
  /** A declared body over the limit is refused before a byte of it is read. */
  const checkLength = (req: Request, _res: Response, next: NextFunction) => {
    if (Number(req.headers['content-length'] ?? 0) > AUDIO_LIMITS.uploadBytes + 64 * 1024) return next(tooLarge());
    upload(req, _res, (err?: unknown) => {
      const code = (err as { code?: string } | undefined)?.code;
      next(code === 'LIMIT_FILE_SIZE' || (err as Error | undefined)?.name === 'BlobTooLargeError' ? tooLarge() : err);
    });
  };

  async function run(
    task: AudioTask,
    body: TranscriptionBody,
    req: Request,
    res: Response,
    projectId: string,
    apiKeyId: string,
    work: WorkTag | undefined,
  ) {
    const stored = req.file as unknown as StoredUpload | undefined;
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

    const requestId = (req as Request & { audioRequestId?: string }).audioRequestId ?? newId('audio');
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
    res.setHeader('X-Gantry-Audio-Request', requestId);
    res.setHeader('X-Gantry-Speech-Model', model.id);
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
    );
    let result: AudioResult;
    try {
      result = await temporal.workflow.getHandle(audioWorkflowId(requestId)).result();
    } catch (err) {
      throw audioFailure(err, input);
    }
    // A translation's `language` is its target (the SDKs' "target language of the translation"), not the one spoken.
    return shape(task === 'translate' ? { ...result, language: input.targetLanguage ?? 'en' } : result, body);
  }

  for (const task of ['transcribe', 'translate'] as const) {
    router.add({
      method: 'post',
      path: task === 'transcribe' ? '/audio/transcriptions' : '/audio/translations',
      operationId: task === 'transcribe' ? 'createTranscription' : 'createTranslation',
      summary:
        task === 'transcribe'
          ? 'Transcribe audio (upload or URL): text, segments, words, speakers'
          : 'Translate speech into English text (or on into es, ca, gl or eo)',
      tags: ['audio'],
      bodyTypes: ['multipart'],
      body: task === 'transcribe' ? TranscriptionBody : TranscriptionFields,
      strict: true,
      before: [checkLength],
      cleanup: async (req) => {
        // A request refused before its workflow started leaves no upload behind.
        const stored = req.file as unknown as StoredUpload | undefined;
        if (stored?.blobKey && !req.res?.getHeader('X-Gantry-Audio-Request')) await blobs.delete(stored.blobKey);
      },
      errors: [404, 413, 503],
      response: { status: 200, description: 'The transcript', schema: TranscriptSchema },
      handler: async ({ body, req, res: response, principal }) =>
        run(task, body as TranscriptionBody, req, response, principal.projectId, principal.apiKeyId, principal.work),
    });
  }
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
