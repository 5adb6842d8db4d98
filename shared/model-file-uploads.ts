/**
 * Uploads of local weight files into the model registry, and downloads of a
 * revision's files, in the official Python CLI's protocol (`tg models upload`,
 * `tg models download`): names and bounds shared by the API, the workflow and
 * its activity.
 */
export const modelFileUploadWorkflowId = (uploadId: string) => `model-file-upload/${uploadId}`;
/** The workflow that imports a model's files from a URL (a remote upload, api/routes/model-uploads.ts). */
export const modelUploadWorkflowId = (uploadId: string) => `model-upload/${uploadId}`;

/** Where a registry revision's files are stored (the same layout as fine-tune outputs and remote uploads). */
export const revisionBlobPrefix = (modelId: string, revisionId: string) => `registry/${modelId}/${revisionId}`;

export const MODEL_UPLOAD_LIMITS = {
  /** Files one upload may name. */
  files: 10_000,
  /** Parts of one file (the CLI cuts 20 MiB parts, so 195 GiB a file). */
  partsPerFile: 10_000,
  /** Bytes of one part. */
  partBytes: 5 * 1024 ** 3,
} as const;

/** Part size of a download plan: each part is one ranged GET (the CLI's own upload part size). */
export const DOWNLOAD_PART_BYTES = 20 * 1024 * 1024;
