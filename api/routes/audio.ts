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
import type { NextFunction, Request, Response } from 'express';
import multer from 'multer';
import { type z } from 'zod';
import { AUDIO_LIMITS } from '../../shared/audio';
import { BlobStorageEngine, type StoredUpload } from '../uploads/blob-storage-engine';
import type { ApiDeps } from '../deps';
import { ApiError } from '../errors';
import type { ApiRouter } from '../route';
import type { ServedSpeechModels } from '../speech-models';
import { TranscriptSchema, TranscriptionFields, TranscriptionBody } from '../schemas/audio';
import { audioRequestId, requestAudio } from '../use-cases/audio';
import { workCallKey } from '../work-call-key';

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
  const { blobs } = deps;
  const upload = multer({
    storage: new BlobStorageEngine(blobs, AUDIO_LIMITS.uploadBytes, (req) => {
      const id = audioRequestId(req.principal!.work, workCallKey(req.headers, req.principal!));
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
      handler: async ({ body, req, res, principal }) =>
        requestAudio(
          deps,
          speechModels,
          principal,
          task,
          body as TranscriptionBody,
          {
            stored: req.file as unknown as StoredUpload | undefined,
            requestId: (req as Request & { audioRequestId?: string }).audioRequestId,
          },
          workCallKey(req.headers, req.principal!),
          (requestId, modelId) => {
            res.setHeader('X-Gantry-Audio-Request', requestId);
            res.setHeader('X-Gantry-Speech-Model', modelId);
          },
        ),
    });
  }
}
