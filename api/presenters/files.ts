/**
 * How a file is shown: the file object of the official SDKs, with its validation state, and a
 * multipart upload as it starts and as it is aborted.
 */
import type { FileRow } from '../../db/files';

export function toFileObject(row: FileRow) {
  return {
    id: row.id,
    object: 'file' as const,
    created_at: Math.floor(new Date(row.created_at).getTime() / 1000),
    filename: row.filename,
    bytes: row.bytes === null ? 0 : Number(row.bytes),
    purpose: row.purpose,
    Processed: row.uploaded_at !== null,
    FileType: row.file_type,
    processing_status: row.processing_status,
    ...(row.validation_report ? { validation_report: row.validation_report } : {}),
    ...(row.processing_note ? { processing_note: row.processing_note } : {}),
  };
}

/** A started multipart upload: its part size and count, and one signed PUT URL per part. */
export const toMultipartUpload = (u: {
  uploadId: string;
  fileId: string;
  partSize: number;
  partCount: number;
  expiresAt: Date;
  parts: Array<{ part_number: number; size: number; url: string }>;
}) => ({
  object: 'file.multipart_upload' as const,
  upload_id: u.uploadId,
  file_id: u.fileId,
  part_size: u.partSize,
  part_count: u.partCount,
  expires_at: u.expiresAt.toISOString(),
  parts: u.parts,
});

export const toAbortedUpload = (u: { id: string; file_id: string }) => ({
  object: 'file.multipart_upload' as const,
  upload_id: u.id,
  file_id: u.file_id,
  aborted: true as const,
});
