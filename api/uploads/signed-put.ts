/**
 * The body of a PUT to a pre-signed URL (a model file's part, a storage object or its part): its
 * declared Content-Length, and the bytes stored as a new blob with their MD5 (the ETag the S3-style
 * clients read back and name again when they complete an upload in parts).
 */
import { createHash } from 'node:crypto';
import { Transform, type Readable } from 'node:stream';
import type { Request } from 'express';
import { BlobTooLargeError, type BlobStore } from '../../providers/storage/blob-store';
import { badRequest, payloadTooLarge } from '../errors';

/** The request's Content-Length, required, and at most `maxBytes`. */
export function declaredLength(req: Request, maxBytes: number): number {
  const declared = Number(req.headers['content-length']);
  if (!req.headers['content-length'] || !Number.isSafeInteger(declared))
    throw badRequest('Send the bytes with a Content-Length header.', 'Content-Length', 'length_required');
  if (declared > maxBytes) throw payloadTooLarge(`At most ${maxBytes} bytes go in one PUT here.`, 'Content-Length');
  return declared;
}

/**
 * Streams the body into the new blob `key`, exactly `declared` bytes; answers their MD5 (hex). A
 * body longer or shorter than it said is a 400, and leaves no blob.
 */
export async function storeSignedPut(blobs: BlobStore, req: Readable, key: string, declared: number): Promise<string> {
  const md5 = createHash('md5');
  const hashing = new Transform({
    transform(chunk: Buffer, _e, done) {
      md5.update(chunk);
      done(null, chunk);
    },
  });
  req.on('error', (err) => hashing.destroy(err));
  let stored;
  try {
    stored = await blobs.put(key, req.pipe(hashing), { maxBytes: declared });
  } catch (err) {
    if (err instanceof BlobTooLargeError) throw badRequest('The body holds more bytes than its Content-Length.', null);
    throw err;
  }
  if (stored.bytes !== declared) {
    await blobs.delete(key);
    throw badRequest(`The body ended after ${stored.bytes} of ${declared} bytes.`, null, 'incomplete_upload');
  }
  return md5.digest('hex');
}
