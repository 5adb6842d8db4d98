/**
 * How a file is shown: the file object of the official SDKs, with its validation state.
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
