/**
 * Sends a stored blob as a download: `Accept-Ranges`, a single HTTP Range answered with 206 and
 * `Content-Range` (the official SDKs probe a download's size with `Range: bytes=0-1` and resume
 * interrupted ones from an offset), 416 for a range outside it, the whole blob otherwise.
 */
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import type { BlobStore } from '../providers/storage/blob-store';
import { ApiError } from './errors';

export interface BlobDownload {
  key: string;
  size: number;
  /** The name offered to save it as (Content-Disposition). */
  filename: string;
  contentType: string;
  etag?: string;
}

export async function sendBlob(req: Request, res: Response, blobs: BlobStore, b: BlobDownload): Promise<void> {
  const ranges = req.headers.range ? req.range(b.size, { combine: true }) : undefined;
  if (ranges === -1) {
    throw new ApiError(
      416,
      `The requested range is outside the ${b.size} bytes of this download.`,
      'invalid_request_error',
      'Range',
      'range_not_satisfiable',
      { 'Content-Range': `bytes */${b.size}` },
    );
  }
  // attachment() sets a type from the extension; ours goes after it.
  res.attachment(b.filename);
  res.set({ 'Accept-Ranges': 'bytes', 'Content-Type': b.contentType, ...(b.etag ? { ETag: `"${b.etag}"` } : {}) });
  if (Array.isArray(ranges) && ranges.length === 1 && b.size > 0) {
    const { start, end } = ranges[0]!;
    res
      .status(206)
      .set({ 'Content-Range': `bytes ${start}-${end}/${b.size}`, 'Content-Length': String(end - start + 1) });
    await pipeline(blobs.read(b.key, { start, end }), res);
    return;
  }
  // No Range, a malformed one (-2), or several: the whole blob, as HTTP allows.
  res.status(200).set('Content-Length', String(b.size));
  if (b.size === 0) return void res.end();
  await pipeline(blobs.read(b.key), res);
}
