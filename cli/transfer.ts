/**
 * Bytes to and from the API, streamed (nothing holds a whole file in memory),
 * with a progress bar on a terminal. Uploads use the pre-signed flow the
 * official SDKs use (POST /v1/files, then a PUT of the bytes), or the
 * multipart routes for files above the single-PUT limit. Downloads write to
 * `<dest>.part` and rename when complete, so a broken download never looks
 * finished.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FilePurpose } from '../shared/files';
import { CliError, EXIT } from './errors';
import type { ApiClient } from './http';
import type { LocalFile } from './local-check';
import { progressBar, type Progress } from './output';

/** The file's bytes from `start` to `end` (inclusive), counted into `onBytes` as they are read. */
async function* counted(path: string, start: number, end: number, onBytes: (n: number) => void) {
  if (end < start) return;
  for await (const chunk of createReadStream(path, { start, end, highWaterMark: 1024 * 1024 })) {
    onBytes((chunk as Buffer).length);
    yield chunk as Buffer;
  }
}

/** Uploads a local file; returns the API's file object (processing_status PENDING or later). */
export async function uploadFile(
  client: ApiClient,
  file: LocalFile,
  purpose: FilePurpose,
): Promise<Record<string, any>> {
  const bar = progressBar(`Uploading ${file.fileName}`, file.size);
  let done = 0;
  const onBytes = (n: number) => {
    done += n;
    bar.update(done);
  };
  try {
    let start: Response;
    try {
      start = await client.request('POST', '/v1/files', {
        json: { purpose, file_name: file.fileName, file_type: file.fileType, bytes: file.size },
        accept: [302],
      });
    } catch (err) {
      if (err instanceof CliError && err.api?.code === 'use_multipart')
        return await multipart(client, file, purpose, onBytes);
      throw err;
    }
    await start.body?.cancel();
    const location = start.headers.get('location');
    if (start.status !== 302 || !location) {
      throw new CliError('The API did not answer the upload with a pre-signed URL (302 Location).', EXIT.API);
    }
    return await client.json('PUT', location, {
      auth: false,
      body: counted(file.path, 0, file.size - 1, onBytes),
      duplex: 'half',
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(file.size) },
    });
  } finally {
    bar.stop();
  }
}

async function multipart(
  client: ApiClient,
  file: LocalFile,
  purpose: FilePurpose,
  onBytes: (n: number) => void,
): Promise<Record<string, any>> {
  const upload = await client.post<{
    upload_id: string;
    part_size: number;
    parts: { part_number: number; size: number; url: string }[];
  }>('/v1/files/multipart/initiate', {
    purpose,
    file_name: file.fileName,
    file_type: file.fileType,
    file_size: file.size,
  });
  try {
    const etags = [];
    for (const part of upload.parts) {
      const start = (part.part_number - 1) * upload.part_size;
      const stored = await client.json<{ etag: string }>('PUT', part.url, {
        auth: false,
        body: counted(file.path, start, start + part.size - 1, onBytes),
        duplex: 'half',
        headers: { 'content-type': 'application/octet-stream', 'content-length': String(part.size) },
      });
      etags.push({ part_number: part.part_number, etag: stored.etag });
    }
    return await client.post('/v1/files/multipart/complete', { upload_id: upload.upload_id, parts: etags });
  } catch (err) {
    await client.post('/v1/files/multipart/abort', { upload_id: upload.upload_id }).catch(() => undefined);
    throw err;
  }
}

/** Streams a response body into `dest`; returns the bytes written. */
export async function saveResponse(res: Response, dest: string, label: string): Promise<number> {
  if (!res.body) throw new CliError('The API sent no content.', EXIT.API);
  const length = Number(res.headers.get('content-length'));
  const bar: Progress = progressBar(label, Number.isFinite(length) && length > 0 ? length : undefined);
  let done = 0;
  const count = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      done += chunk.length;
      bar.update(done);
      cb(null, chunk);
    },
  });
  const partial = `${dest}.part`;
  try {
    await pipeline(Readable.fromWeb(res.body as any), count, createWriteStream(partial));
    await rename(partial, dest);
  } catch (err) {
    await rm(partial, { force: true });
    throw new CliError(`The download into ${dest} failed: ${(err as Error).message}`, EXIT.API);
  } finally {
    bar.stop();
  }
  return done;
}
