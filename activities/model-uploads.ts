/**
 * Remote model uploads: the import activity streams a URL (a file, or a .tar,
 * .tar.gz or .tar.zst archive of a model's files) into the blob store as a new
 * revision of a registered model, recording each step as an upload event. The
 * revision id is derived from the upload, so a retried attempt rewrites the
 * same revision instead of adding another. A source credential is unsealed
 * here, on the worker, and never passes through workflow history.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { Duplex, PassThrough, Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { Context, heartbeat } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import tar from 'tar-stream';
import type { RemoteFetchPolicy } from '../platform/config';
import type { Keyring } from '../platform/keyring';
import { addUploadEvent, getUploadById, setUploadStatus, type UploadStatus } from '../db/model-uploads';
import { withTransaction, type Db } from '../db/pool';
import { insertRevision } from '../db/models';
import { projectStoredBytes } from '../db/files';
import { openFromRow, SEALED_COLUMNS } from '../db/sealed-values';
import { fetchRemote, RemoteFetchRefused } from '../providers/remote/fetch-remote';
import { assertSafeKey, BlobTooLargeError, type BlobStore } from '../providers/storage/blob-store';
import { checkRevisionWeights } from '../providers/trainer/safetensors';
import { subprocessEnv } from '../providers/process/subprocess-env';

type Stored = { path: string; bytes: number; sha256: string };

/**
 * An archive may unpack to at most this many times the bytes downloaded (past a floor that small
 * archives of configs and tar padding need). Weights compress little (about 1.1×); a small zstd
 * or gzip file that unpacks to hundreds of GiB is a bomb, refused long before it fills a disk.
 */
export const MAX_EXPANSION = 100;
const EXPANSION_FLOOR_BYTES = 64 * 1024 ** 2;

class DecompressionBomb extends Error {}

/** Passes the unpacked bytes on while they stay within MAX_EXPANSION of the bytes downloaded so far. */
function expansionGuard(downloaded: () => number): Transform {
  let unpacked = 0;
  return new Transform({
    transform(chunk: Buffer, _e, done) {
      unpacked += chunk.length;
      const allowed = Math.max(EXPANSION_FLOOR_BYTES, downloaded() * MAX_EXPANSION);
      if (unpacked > allowed) {
        return done(
          new DecompressionBomb(
            `The archive unpacks to more than ${MAX_EXPANSION} times its ${downloaded()} bytes; refused as a decompression bomb.`,
          ),
        );
      }
      done(null, chunk);
    },
  });
}

/** How the download is unpacked, from the URL's file name. */
function formatOf(url: URL): 'tar' | 'tar.gz' | 'tar.zst' | 'file' {
  const name = url.pathname.toLowerCase();
  if (name.endsWith('.tar.zst') || name.endsWith('.tzst')) return 'tar.zst';
  if (name.endsWith('.tar.gz') || name.endsWith('.tgz')) return 'tar.gz';
  if (name.endsWith('.tar')) return 'tar';
  return 'file';
}

/** A limit on what one import stores, and how a refusal names it. */
interface ImportLimit {
  bytes: number;
  what: string;
}

/** The platform's limit on a download, or what the project's storage quota leaves, whichever is less. */
async function importLimit(db: Db, policy: RemoteFetchPolicy, quotaBytes: number, projectId: string) {
  const room = quotaBytes > 0 ? quotaBytes - (await projectStoredBytes(db, projectId)) : Infinity;
  return room < policy.maxBytes
    ? { bytes: Math.max(room, 0), what: `the ${Math.max(room, 0)} bytes the project's storage quota leaves` }
    : { bytes: policy.maxBytes, what: `the limit of ${policy.maxBytes} bytes` };
}

/** Why a download failed for good (a non-retryable failure the user reads), or undefined to retry it. */
function downloadRefusal(err: unknown, format: string, limit: ImportLimit): ApplicationFailure | undefined {
  if (err instanceof BlobTooLargeError)
    return ApplicationFailure.nonRetryable(`The model is larger than ${limit.what}.`, 'UploadRefused');
  if (err instanceof DecompressionBomb) return ApplicationFailure.nonRetryable(err.message, 'UploadRefused');
  if (err instanceof ApplicationFailure) return err;
  if (/zstd|incorrect header|unexpected end|invalid tar/i.test((err as Error).message))
    return ApplicationFailure.nonRetryable(
      `The ${format} archive could not be read: ${(err as Error).message}`,
      'UploadInvalid',
    );
  return undefined;
}

/** The stages that turn the downloaded bytes into a tar stream. */
function unpacking(format: 'tar' | 'tar.gz' | 'tar.zst'): Duplex[] {
  if (format === 'tar.gz') return [createGunzip()];
  if (format === 'tar.zst') return [zstdDecompressor()];
  return [];
}

/** `zstd -d` as a stream stage; a failed or non-zero exit fails the stage. */
function zstdDecompressor(): Duplex {
  const zstd = spawn('zstd', ['-d', '-c', '-q'], { stdio: ['pipe', 'pipe', 'ignore'], env: subprocessEnv() });
  const stage = Duplex.from({ writable: zstd.stdin, readable: zstd.stdout });
  zstd.on('error', (err) => stage.destroy(err));
  zstd.on('exit', (code) => code !== 0 && code !== null && stage.destroy(new Error(`zstd -d exited with ${code}`)));
  // The pipeline ending early (a refusal, a dropped connection) must not leave zstd running.
  stage.on('close', () => zstd.exitCode === null && zstd.kill());
  return stage;
}

/**
 * Waits for a pipeline and what consumes its last stage. A consumer that fails ends that stage, so
 * the pipeline stops too; when both fail, the consumer's reason is the one to report (the pipeline
 * then only saw its reader go, or passed the same error on).
 */
async function fedAndConsumed(
  feeding: Promise<void>,
  consuming: Promise<void>,
  last: { destroy(err?: Error): unknown },
): Promise<void> {
  const [fed, consumed] = await Promise.allSettled([
    feeding,
    consuming.catch((err: Error) => {
      last.destroy(err);
      throw err;
    }),
  ]);
  if (consumed.status === 'rejected') throw consumed.reason;
  if (fed.status === 'rejected') throw fed.reason;
}

/** A path inside the revision: plain segments a blob key can hold. */
function revisionPath(name: string): string {
  const clean = name.replace(/^\.\//, '');
  try {
    assertSafeKey(clean);
  } catch {
    throw ApplicationFailure.nonRetryable(
      `The archive holds '${name}', which is not a plain relative path.`,
      'UploadInvalid',
    );
  }
  return clean;
}

export function createModelUploadActivities(deps: {
  db: Db;
  blobs: BlobStore;
  policy: RemoteFetchPolicy;
  /** GANTRY_PROJECT_STORAGE_QUOTA_BYTES (0: none): an import stores at most what it leaves. */
  storageQuotaBytes: number;
  /** Opens sealed values (platform/keyring.ts). */
  keyring?: Keyring;
}) {
  const { db, blobs, policy } = deps;
  type Level = 'LEVEL_INFO' | 'LEVEL_WARN' | 'LEVEL_ERROR';
  const event = (uploadId: string, level: Level, type: string, message: string) =>
    addUploadEvent(db, uploadId, { level, type, message });
  /**
   * A new status and the event that says why, in one transaction: whoever reads the upload's
   * status reads its event too (as a fine-tune's are written: activities/fine-tunes.ts).
   */
  const statusWithEvent = (
    uploadId: string,
    status: Parameters<typeof setUploadStatus>[2],
    e: { level: Level; type: string; message: string },
  ) =>
    withTransaction(db, async (tx) => {
      await setUploadStatus(tx, uploadId, status);
      await addUploadEvent(tx, uploadId, e);
    });

  return {
    async importRemoteModel({
      uploadId,
    }: {
      uploadId: string;
    }): Promise<{ revisionId: string; files: number; bytes: number }> {
      const upload = await getUploadById(db, uploadId);
      if (!upload) throw ApplicationFailure.nonRetryable(`upload ${uploadId} no longer exists`, 'UploadGone');
      const ctx = Context.current();
      const attempt = ctx.info.attempt;
      await statusWithEvent(
        uploadId,
        { status: 'REMOTE_UPLOAD_STATUS_RUNNING', restartCount: attempt - 1, message: 'Downloading.' },
        {
          level: 'LEVEL_INFO',
          type: attempt > 1 ? 'download.restarted' : 'download.started',
          message: attempt > 1 ? `Attempt ${attempt}: downloading again.` : 'Downloading.',
        },
      );
      const token =
        upload.sealed_token && deps.keyring
          ? openFromRow(
              deps.keyring,
              SEALED_COLUMNS.registryUploadToken,
              { id: upload.id, projectId: upload.project_id },
              upload.sealed_token,
            )
          : undefined;
      const revisionId = 'rv_' + createHash('sha256').update(uploadId).digest('hex').slice(0, 24);
      const prefix = `registry/${upload.model_id}/${revisionId}`;

      let remote;
      try {
        remote = await fetchRemote(upload.remote_url, policy, { token, signal: ctx.cancellationSignal });
      } catch (err) {
        if (err instanceof RemoteFetchRefused) throw ApplicationFailure.nonRetryable(err.message, 'UploadRefused');
        throw err;
      }
      const limit = await importLimit(db, policy, deps.storageQuotaBytes, upload.project_id);
      if (remote.length !== null && remote.length > limit.bytes) {
        remote.body.destroy();
        throw ApplicationFailure.nonRetryable(
          `The download is ${remote.length} bytes, more than ${limit.what}.`,
          'UploadRefused',
        );
      }
      let downloaded = 0;
      const meter = new Transform({
        transform(chunk: Buffer, _e, done) {
          downloaded += chunk.length;
          if (downloaded > limit.bytes) return done(new BlobTooLargeError(limit.bytes));
          heartbeat({ downloaded });
          done(null, chunk);
        },
      });
      const stored: Stored[] = [];
      let total = 0;
      const store = async (name: string, body: Readable) => {
        const file = revisionPath(name);
        const blob = await blobs.put(`${prefix}/${file}`, body, { maxBytes: limit.bytes - total });
        total += blob.bytes;
        stored.push({ path: file, ...blob });
        await event(
          uploadId,
          'LEVEL_INFO',
          'file.stored',
          `${file}: ${blob.bytes} bytes, sha256 ${blob.sha256.slice(0, 12)}…`,
        );
      };
      const format = formatOf(remote.url);
      try {
        // One pipeline from the socket to the last stage: a failure anywhere (the connection
        // dropping, a bomb, a store refusing) ends every stage, so an attempt always ends.
        if (format === 'file') {
          const body = new PassThrough();
          await fedAndConsumed(
            pipeline(remote.body, meter, body),
            store(path.posix.basename(remote.url.pathname) || 'model', body),
            body,
          );
        } else {
          const extract = tar.extract();
          await fedAndConsumed(
            pipeline([remote.body, meter, ...unpacking(format), expansionGuard(() => downloaded), extract]),
            (async () => {
              for await (const entry of extract) {
                if (entry.header.type !== 'file') entry.resume();
                else await store(entry.header.name, Readable.from(entry));
              }
            })(),
            extract,
          );
        }
      } catch (err) {
        const refusal = downloadRefusal(err, format, limit);
        if (!refusal) throw err; // retried: the next attempt writes the same files again
        // Refused for good: what was stored of it goes, so a failed upload leaves nothing on disk.
        await Promise.all(stored.map((f) => blobs.delete(`${prefix}/${f.path}`)));
        throw refusal;
      }
      await event(uploadId, 'LEVEL_INFO', 'download.finished', `${stored.length} file(s), ${total} bytes.`);

      const { parameters, errors } = await checkRevisionWeights(
        blobs,
        prefix,
        stored.map((f) => f.path),
      );
      await withTransaction(db, async (tx) => {
        await tx.query('DELETE FROM registry_model_revisions WHERE id = $1', [revisionId]); // an earlier attempt's
        await insertRevision(tx, {
          id: revisionId,
          modelId: upload.model_id,
          blobPrefix: prefix,
          files: stored,
          validationStatus: errors.length ? 'REVISION_VALIDATION_STATUS_FAILED' : 'REVISION_VALIDATION_STATUS_SUCCESS',
        });
        if (!errors.length)
          await tx.query('UPDATE registry_models SET parameters_total = $2, updated_at = now() WHERE id = $1', [
            upload.model_id,
            parameters,
          ]);
      });
      if (errors.length) {
        await event(uploadId, 'LEVEL_ERROR', 'validation.failed', errors.join('; '));
        throw ApplicationFailure.nonRetryable(
          `Revision ${revisionId} is not a usable model: ${errors.join('; ')}.`,
          'UploadInvalid',
        );
      }
      await event(uploadId, 'LEVEL_INFO', 'revision.created', `Revision ${revisionId}: ${parameters} parameters.`);
      return { revisionId, files: stored.length, bytes: total };
    },

    /** The upload's final status, with the sentence a person reads. */
    async finishUpload(f: { uploadId: string; status: UploadStatus; message: string; revisionId?: string }) {
      const failed = f.status === 'REMOTE_UPLOAD_STATUS_FAILED';
      await statusWithEvent(
        f.uploadId,
        { status: f.status, message: f.message, revisionId: f.revisionId },
        {
          level: failed ? 'LEVEL_ERROR' : 'LEVEL_INFO',
          type: failed ? 'upload.failed' : 'upload.succeeded',
          message: f.message,
        },
      );
    },
  };
}

export type ModelUploadActivities = ReturnType<typeof createModelUploadActivities>;
