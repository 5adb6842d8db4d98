/** Names and types shared by the files API, its workflow and activities. */
export const FILE_PURPOSES = ['fine-tune', 'calibration', 'eval', 'batch-api'] as const;
export type FilePurpose = (typeof FILE_PURPOSES)[number];

export const FILE_TYPES = ['csv', 'jsonl', 'parquet'] as const;
export type FileType = (typeof FILE_TYPES)[number];

export const PROCESSING_STATUSES = ['PENDING', 'QUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'INVALID_FORMAT'] as const;
export type ProcessingStatus = (typeof PROCESSING_STATUSES)[number];

/**
 * Which purposes are validated at upload. Fine-tuning data is validated fully;
 * evaluation data structurally (one object per JSONL line, consistent CSV
 * rows). Calibration and batch files are passed through unvalidated.
 */
export function purposeNeedsValidation(purpose: FilePurpose): boolean {
  return purpose === 'fine-tune' || purpose === 'eval';
}

export const FILE_RESOURCE_TYPE = 'file';

export function fileValidationWorkflowId(fileId: string): string {
  return `file-validation/${fileId}`;
}

/** The report of the spec (File.validation_report). */
export interface ValidationReport {
  valid: boolean;
  file_id: string;
  nlines: number;
  dataset_format?: string;
  dataset_has_sample_weights: boolean;
  dataset_has_message_weights: boolean;
  dataset_is_multimodal: boolean;
  dataset_has_tools: boolean;
  dataset_has_parallel_tool_calls: boolean;
  dataset_has_reasoning: boolean;
  error_type?: 'INVALID_FORMAT';
  error?: string;
}

export interface FileValidationInput {
  fileId: string;
  projectId: string;
  /** How long the validating activity may go silent before Temporal retries it elsewhere. */
  heartbeatTimeoutSeconds: number;
}
