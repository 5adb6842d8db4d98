/**
 * A multer storage engine that streams the uploaded part straight into the
 * blob store (size and SHA-256 computed on the way); nothing is buffered.
 * The blob key is made here from the project and a new file id, never from
 * the client's file name.
 */
import type { Request } from 'express';
import type { StorageEngine } from 'multer';
import { newId } from '../../platform/ids';
import type { BlobStore } from '../../providers/storage/blob-store';

export interface StoredUpload {
  fileId: string;
  blobKey: string;
  size: number;
  sha256: string;
}

export function fileBlobKey(projectId: string, fileId: string): string {
  return `files/${projectId}/${fileId}`;
}

export class BlobStorageEngine implements StorageEngine {
  constructor(
    private readonly blobs: BlobStore,
    private readonly maxBytes: number,
    /** Where an upload goes (default: the project's files). */
    private readonly place: (req: Request) => { id: string; key: string } = (req) => {
      const id = newId('file');
      return { id, key: fileBlobKey(req.principal!.projectId, id) };
    },
  ) {}

  _handleFile(
    req: Request,
    file: Express.Multer.File,
    cb: (error?: unknown, info?: Partial<Express.Multer.File>) => void,
  ) {
    const { id: fileId, key: blobKey } = this.place(req);
    this.blobs.put(blobKey, file.stream, { maxBytes: this.maxBytes }).then(
      (stored) =>
        cb(null, { fileId, blobKey, size: stored.bytes, sha256: stored.sha256 } as Partial<Express.Multer.File>),
      (err) => cb(err),
    );
  }

  _removeFile(_req: Request, file: Express.Multer.File, cb: (error: Error | null) => void) {
    const { blobKey } = file as unknown as StoredUpload;
    if (!blobKey) return cb(null);
    this.blobs.delete(blobKey).then(() => cb(null), cb);
  }
}
