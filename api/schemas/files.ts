import { z } from 'zod';
import { FILE_PURPOSES, FILE_TYPES, PROCESSING_STATUSES } from '../../shared/files';
import { cursorPageOf, IsoDateTime, listOf } from './common';

/** The spec's file_name rule: valid UTF-8, no NUL, at most 128 bytes. Metadata only: never a path. */
export const FileName = z
  .string()
  .min(1, 'must not be empty')
  // 128 bytes are at least 128 characters: a bound the document can state (the byte rule below is exact).
  .max(128, 'must be at most 128 bytes of UTF-8')
  .regex(/^[^\u0000]*$/, 'must not contain NUL characters')
  // Form fields arrive decoded; bytes that were not UTF-8 become U+FFFD.
  .regex(/^[^\uFFFD]*$/, 'must be valid UTF-8')
  .refine((s) => Buffer.byteLength(s, 'utf8') <= 128, 'must be at most 128 bytes of UTF-8');

/**
 * inferFileType (api/use-cases/files.ts) needs file_type, or a file_name whose extension (after a
 * character other than a dot, as path.extname reads it) is jsonl, csv or parquet in any case.
 */
const FILE_TYPE_KNOWN = [
  { required: ['file_type'] },
  {
    properties: { file_name: { pattern: '[^/.]\\.([jJ][sS][oO][nN][lL]|[cC][sS][vV]|[pP][aA][rR][qQ][uU][eE][tT])$' } },
  },
];

/** A file's SHA-256, as the official SDKs send it before an upload: a project holding those bytes gets 409. */
const Checksum = z
  .string()
  .regex(/^[0-9a-fA-F]{64}$/, 'must be the SHA-256 of the file, 64 hex digits')
  .optional()
  .describe('SHA-256 of the file (hex); a project that already holds these bytes gets 409 with their file_id');

export const UploadFileFields = z
  .object({
    purpose: z.enum(FILE_PURPOSES),
    file_name: FileName,
    file_type: z.enum(FILE_TYPES).optional(),
    file: z.any().optional().meta({ type: 'string', format: 'binary', description: 'The file content' }),
  })
  // The file part is read by multer, not this schema: the route refuses a form without it.
  .meta({ id: 'UploadFileRequest', required: ['purpose', 'file_name', 'file'], anyOf: FILE_TYPE_KNOWN });

export const CreateFileUploadBody = z
  .object({
    purpose: z.enum(FILE_PURPOSES),
    file_name: FileName,
    file_type: z.enum(FILE_TYPES).optional(),
    bytes: z.coerce.number().int().nonnegative().optional().describe('Size of the upload, to bind the URL to it'),
    checksum: Checksum,
  })
  .meta({ id: 'CreateFileUploadRequest', anyOf: FILE_TYPE_KNOWN });

export const ValidationReportSchema = z.object({
  valid: z.boolean(),
  file_id: z.string(),
  nlines: z.number().int(),
  dataset_format: z.string().optional(),
  dataset_has_sample_weights: z.boolean(),
  dataset_has_message_weights: z.boolean(),
  dataset_is_multimodal: z.boolean(),
  dataset_has_tools: z.boolean(),
  dataset_has_parallel_tool_calls: z.boolean(),
  dataset_has_reasoning: z.boolean(),
  error_type: z.literal('INVALID_FORMAT').optional(),
  error: z.string().optional(),
});

export const FileObjectSchema = z
  .object({
    id: z.string(),
    object: z.literal('file'),
    created_at: z.number().int().describe('Unix seconds'),
    filename: z.string(),
    bytes: z.number().int(),
    purpose: z.enum(FILE_PURPOSES),
    Processed: z.boolean().describe('Deprecated: whether the file is fully uploaded'),
    FileType: z.enum(FILE_TYPES),
    processing_status: z.enum(PROCESSING_STATUSES),
    validation_report: ValidationReportSchema.optional(),
    processing_note: z.string().optional().describe('Why validation was skipped or could not finish'),
  })
  .meta({ id: 'File' });

export const FileListSchema = cursorPageOf(FileObjectSchema).meta({ id: 'FileList' });

export const FileDeletedSchema = z.object({ id: z.string(), object: z.literal('file'), deleted: z.literal(true) });

export const FileEventsSchema = listOf(
  z.object({ status: z.enum(PROCESSING_STATUSES), message: z.string().nullable(), created_at: IsoDateTime }),
);

export const InitiateMultipartBody = z
  .object({
    purpose: z.enum(FILE_PURPOSES),
    file_name: FileName,
    file_type: z.enum(FILE_TYPES).optional(),
    file_size: z.number().int().positive().describe('Total size of the file in bytes'),
    checksum: Checksum,
    /** Sent by the Python SDK; the part count follows from file_size and the part size Gantry answers with. */
    num_parts: z.number().int().positive().optional(),
  })
  .meta({ id: 'InitiateMultipartUploadRequest', anyOf: FILE_TYPE_KNOWN });

export const MultipartUploadSchema = z
  .object({
    object: z.literal('file.multipart_upload'),
    upload_id: z.string(),
    file_id: z.string(),
    part_size: z.number().int(),
    part_count: z.number().int(),
    expires_at: IsoDateTime,
    parts: z.array(z.object({ part_number: z.number().int(), size: z.number().int(), url: z.string() })),
  })
  .meta({ id: 'MultipartUpload' });

export const CompleteMultipartBody = z
  .object({
    upload_id: z.string().min(1).max(128),
    parts: z
      .array(z.object({ part_number: z.number().int().positive(), etag: z.string().min(1).max(128) }))
      .min(1)
      .describe('Every part, with the ETag its PUT returned'),
  })
  .meta({ id: 'CompleteMultipartUploadRequest' });

export const AbortMultipartBody = z.object({ upload_id: z.string().min(1).max(128) });

export const MultipartAbortedSchema = z.object({
  object: z.literal('file.multipart_upload'),
  upload_id: z.string(),
  file_id: z.string(),
  aborted: z.literal(true),
});

export const PartUploadedSchema = z.object({ part_number: z.number().int(), size: z.number().int(), etag: z.string() });

export const PartParams = z.object({ id: z.string().min(1).max(128), part: z.coerce.number().int().positive() });
