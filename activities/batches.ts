/**
 * The activities of a batch (`batch/<id>`, workflows/batches.ts), on the control queue:
 *
 * - validateBatchInput reads the input once, checks every line (shared/batches.ts) before any call
 *   is made, and cuts it into slices by byte range, so a slice is read again without the rest;
 * - runBatchSlice calls the model for each line of a slice that has no answer yet, at the
 *   project's concurrency, through the gateway as the batch's key (model-calls.ts), and records
 *   each answer in PostgreSQL as it comes: the line is done only once its answer is stored, so a
 *   retry (a lost worker, a transient failure) redoes only lines with no answer;
 * - finishBatch writes the output and error files (the project's files, purpose `batch-api`) from
 *   the recorded answers, in input order, and projects how the batch ended;
 * - removeBatchFiles removes the input, output and error files once the retention has passed.
 */
import { Context, heartbeat } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import {
  answeredLines,
  answersAfter,
  deleteBatchAnswers,
  getBatchById,
  projectBatch,
  recordBatchAnswer,
  refreshBatchProgress,
  type BatchAnswer,
} from '../db/batches';
import { getFile, getFileById, lockFileForRemoval, removeLockedFile } from '../db/files';
import { withTransaction, type Db } from '../db/pool';
import type { Keyring } from '../platform/keyring';
import type { BlobStore } from '../providers/storage/blob-store';
import { AUDIO_LIMITS } from '../shared/audio';
import {
  AUDIO_FILE_ID,
  BATCH_MAX_LINES,
  checkBatchLine,
  type BatchEndpoint,
  type BatchSlice,
  type BatchStatus,
} from '../shared/batches';
import { linesOf } from './lines-of';
import { resultFileId, storeWrittenFile } from './written-files';
import { forgetWorkCallAnswers } from '../db/work-call-answers';
import { callModel, ModelCallTransient, type ModelCallDeps } from './model-calls';

export interface BatchActivityDeps {
  db: Db;
  blobs: BlobStore;
  keyring?: Keyring;
  modelCalls?: Omit<ModelCallDeps, 'keyring'>;
  /** Lines of one slice in flight at once (the gateway holds the project's work calls to the same). */
  concurrency: number;
}

/** Bad lines the error file of a refused input lists at most (the first one names the batch's error). */
const MAX_REPORTED_LINES = 100;
/** Tries of a line within one run of a slice before the slice is handed back to be retried later. */
const LINE_TRIES = 4;

export type BatchValidation =
  { ok: true; slices: BatchSlice[]; totalLines: number } | { ok: false; error: string; errorFileId: string };

export function createBatchActivities(deps: BatchActivityDeps) {
  const { db, blobs } = deps;

  async function requireBatch(batchId: string) {
    const batch = await getBatchById(db, batchId);
    if (!batch) throw ApplicationFailure.nonRetryable(`Batch ${batchId} is gone.`, 'BatchGone');
    return batch;
  }

  /** Stores `lines` as the project's file `fileId` (purpose batch-api), unless it exists. */
  const storeResultFile = (projectId: string, fileId: string, filename: string, lines: AsyncIterable<string>) =>
    storeWrittenFile(db, blobs, { projectId, fileId, filename, purpose: 'batch-api', writer: 'its batch' }, lines);

  /**
   * An audio line whose `file` names one of the project's files: the body with that file's bytes,
   * sent as an upload (as a client sends one); or the answer when there is no such file or it is
   * larger than an upload may be. Any other body as it is.
   */
  async function audioOf(
    projectId: string,
    body: Record<string, unknown>,
  ): Promise<{ body: Record<string, unknown> } | Omit<BatchAnswer, 'line' | 'custom_id'>> {
    if (typeof body.file !== 'string' || !AUDIO_FILE_ID.test(body.file)) return { body };
    const refused = (status: number, message: string) => ({
      status_code: status,
      body: { error: { message, type: 'invalid_request_error', param: 'file', code: null } },
      error: message,
    });
    const file = await getFile(db, projectId, body.file);
    if (!file?.uploaded_at) return refused(404, `No file '${body.file}' in this project.`);
    if (Number(file.bytes) > AUDIO_LIMITS.uploadBytes)
      return refused(413, `File '${file.id}' is larger than an audio upload may be (80 MB); send its URL instead.`);
    const chunks: Buffer[] = [];
    for await (const chunk of blobs.read(file.blob_key)) chunks.push(chunk as Buffer);
    return { body: { ...body, file: new Blob([Buffer.concat(chunks)]) } };
  }

  return {
    async validateBatchInput(input: { batchId: string; sliceLines: number }): Promise<BatchValidation> {
      const batch = await requireBatch(input.batchId);
      const file = await getFileById(db, batch.input_file_id);
      if (!file || file.project_id !== batch.project_id || !file.uploaded_at)
        return refused(batch.id, batch.project_id, 'The input file is gone.', []);
      const seen = new Set<string>();
      const slices: BatchSlice[] = [];
      const bad: { line: number; reason: string }[] = [];
      let lines = 0;
      for await (const line of linesOf(blobs.read(file.blob_key))) {
        const checked = checkBatchLine(line.text, batch.endpoint as BatchEndpoint, seen, batch.model_id ?? undefined);
        if ('reason' in checked) {
          if (bad.length < MAX_REPORTED_LINES) bad.push({ line: line.number, reason: checked.reason });
          continue;
        }
        const last = slices[slices.length - 1];
        if (!last || last.lines >= input.sliceLines)
          slices.push({ firstLine: lines, lines: 1, start: line.start, end: line.end });
        else {
          last.lines++;
          last.end = line.end;
        }
        if (++lines > BATCH_MAX_LINES) {
          bad.push({ line: line.number, reason: `a batch has at most ${BATCH_MAX_LINES} lines` });
          break;
        }
        if (lines % 10_000 === 0) heartbeat({ lines });
      }
      if (!lines && !bad.length) bad.push({ line: 1, reason: 'the file has no lines' });
      if (bad.length) return refused(batch.id, batch.project_id, `Line ${bad[0].line}: ${bad[0].reason}`, bad);
      await projectBatch(db, batch.id, { status: 'IN_PROGRESS', totalLines: lines });
      return { ok: true, slices, totalLines: lines };

      async function refused(
        batchId: string,
        projectId: string,
        error: string,
        report: { line: number; reason: string }[],
      ): Promise<BatchValidation> {
        const errorFileId = resultFileId(batchId, 'error');
        await storeResultFile(
          projectId,
          errorFileId,
          `${batchId}_error.jsonl`,
          (async function* () {
            for (const r of report)
              yield `${JSON.stringify({ line: r.line, error: { message: `Line ${r.line}: ${r.reason}`, code: 'invalid_line' } })}\n`;
          })(),
        );
        return { ok: false, error, errorFileId };
      }
    },

    async runBatchSlice(input: { batchId: string; slice: BatchSlice }): Promise<{ answered: number }> {
      const batch = await requireBatch(input.batchId);
      const file = await getFileById(db, batch.input_file_id);
      if (!file) throw ApplicationFailure.nonRetryable('The input file is gone.', 'InputGone');
      if (!deps.modelCalls) throw ApplicationFailure.nonRetryable('This worker makes no model calls.', 'NoModelCalls');
      const { slice } = input;
      const done = await answeredLines(db, batch.id, slice.firstLine, slice.firstLine + slice.lines);
      const todo: { line: number; custom_id: string; body: Record<string, unknown> }[] = [];
      let index = slice.firstLine;
      for await (const line of linesOf(
        blobs.read(file.blob_key, { start: slice.start, end: slice.end }),
        slice.start,
      )) {
        const i = index++;
        if (done.has(i)) continue;
        const parsed = JSON.parse(line.text) as { custom_id: string; body: Record<string, unknown> };
        const body = parsed.body.model === undefined ? { ...parsed.body, model: batch.model_id } : parsed.body;
        todo.push({ line: i, custom_id: parsed.custom_id, body });
      }
      const ctx = Context.current();
      const calls: ModelCallDeps = { ...deps.modelCalls, keyring: deps.keyring };
      let answered = 0;
      let lastProgress = Date.now();
      const answer = async (t: (typeof todo)[number]) => {
        const audio = await audioOf(batch.project_id, t.body);
        if ('status_code' in audio) {
          await recordBatchAnswer(db, batch.id, { line: t.line, custom_id: t.custom_id, ...audio });
          answered++;
          return;
        }
        for (let attempt = 1; ; attempt++) {
          try {
            const a = await callModel(calls, {
              apiKeyId: batch.api_key_id,
              work: { kind: 'batch', id: batch.id },
              path: batch.endpoint as BatchEndpoint,
              body: audio.body,
              key: `line-${t.line}`,
              signal: ctx.cancellationSignal,
            });
            const record: BatchAnswer = {
              line: t.line,
              custom_id: t.custom_id,
              status_code: a.status,
              body: a.body,
              error: a.status >= 400 ? errorText(a.body, a.status) : null,
            };
            await recordBatchAnswer(db, batch.id, record);
            answered++;
            return;
          } catch (err) {
            if (!(err instanceof ModelCallTransient) || attempt >= LINE_TRIES || ctx.cancellationSignal.aborted)
              throw err;
            const wait = Math.min(30, err.retryAfterSeconds ?? 2 ** attempt) * 1000;
            await new Promise((r) => setTimeout(r, wait));
          }
        }
      };
      let next = 0;
      const lane = async () => {
        while (next < todo.length && !ctx.cancellationSignal.aborted) {
          await answer(todo[next++]);
          heartbeat({ answered });
          if (Date.now() - lastProgress > 1000) {
            lastProgress = Date.now();
            await refreshBatchProgress(db, batch.id);
          }
        }
      };
      // Alive while calls are slow: a lost worker is noticed by its missing heartbeats, not by a slow answer.
      const beat = setInterval(() => heartbeat({ answered }), 2000);
      try {
        await Promise.all(Array.from({ length: Math.min(deps.concurrency, todo.length) }, lane));
      } finally {
        clearInterval(beat);
      }
      await refreshBatchProgress(db, batch.id);
      return { answered };
    },

    /** Writes the output and error files from the recorded answers and projects the end. Idempotent. */
    async finishBatch(input: { batchId: string; status: BatchStatus; error?: string; errorFileId?: string }) {
      const batch = await requireBatch(input.batchId);
      const pages = (keep: (a: BatchAnswer) => boolean, line: (a: BatchAnswer) => unknown) =>
        (async function* () {
          let after = -1;
          for (;;) {
            const page = await answersAfter(db, batch.id, after, 1000);
            if (!page.length) return;
            for (const a of page) if (keep(a)) yield `${JSON.stringify(line(a))}\n`;
            after = page[page.length - 1].line;
          }
        })();
      const ok = (a: BatchAnswer) => a.status_code !== null && a.status_code < 400;
      let outputFileId: string | undefined;
      let errorFileId = input.errorFileId;
      if (input.status !== 'FAILED' || !input.errorFileId) {
        const { rows } = await db.query<{ ok: string; failed: string }>(
          `SELECT count(*) FILTER (WHERE status_code < 400) AS ok, count(*) FILTER (WHERE NOT status_code < 400 OR status_code IS NULL) AS failed
             FROM batch_answers WHERE batch_id = $1`,
          [batch.id],
        );
        if (Number(rows[0].ok) > 0) {
          outputFileId = resultFileId(batch.id, 'output');
          await storeResultFile(
            batch.project_id,
            outputFileId,
            `${batch.id}_output.jsonl`,
            pages(ok, (a) => ({
              id: `${batch.id}-${a.line}`,
              custom_id: a.custom_id,
              response: { status_code: a.status_code, body: a.body },
              error: null,
            })),
          );
        }
        if (Number(rows[0].failed) > 0) {
          errorFileId = resultFileId(batch.id, 'error');
          await storeResultFile(
            batch.project_id,
            errorFileId,
            `${batch.id}_error.jsonl`,
            pages(
              (a) => !ok(a),
              (a) => ({
                id: `${batch.id}-${a.line}`,
                custom_id: a.custom_id,
                response: { status_code: a.status_code, body: a.body },
                error: { message: a.error, code: a.status_code === null ? 'failed' : `http_${a.status_code}` },
              }),
            ),
          );
        }
      }
      await projectBatch(db, batch.id, {
        status: input.status,
        error: input.error ?? null,
        outputFileId: outputFileId ?? null,
        errorFileId: errorFileId ?? null,
        ended: true,
      });
      // The answers are in batch_answers now; the gateway's copies are not needed (a call still in
      // flight at a cancel keeps one later: removeBatchFiles takes that with the rest).
      await forgetWorkCallAnswers(db, { kind: 'batch', id: batch.id });
    },

    /** Removes the batch's input, output and error files and its recorded answers (after the retention). */
    async removeBatchFiles(input: { batchId: string }): Promise<void> {
      const batch = await getBatchById(db, input.batchId);
      if (!batch) return;
      for (const fileId of [batch.input_file_id, batch.output_file_id, batch.error_file_id]) {
        if (!fileId) continue;
        await withTransaction(db, async (tx) => {
          const file = await lockFileForRemoval(tx, fileId);
          if (file) await removeLockedFile(tx, { id: fileId, blob_key: file.blob_key });
        });
      }
      await deleteBatchAnswers(db, batch.id);
      await forgetWorkCallAnswers(db, { kind: 'batch', id: batch.id });
    },
  };
}

export type BatchActivities = ReturnType<typeof createBatchActivities>;

function errorText(body: unknown, status: number): string {
  const message = (body as { error?: { message?: unknown } } | null)?.error?.message;
  return typeof message === 'string' ? message : `HTTP ${status}`;
}
