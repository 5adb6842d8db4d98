/** Turns a driver's outcome into the spec's validation_report. */
import type { FileType, ValidationReport } from '../shared/files';
import type { ValidationOutcome } from './progress';

export function buildReport(fileId: string, fileType: FileType, outcome: ValidationOutcome): ValidationReport {
  const s = outcome.progress.state;
  const format = fileType === 'parquet' ? 'TOKENIZED' : fileType === 'csv' ? 'CSV' : (s.format ?? undefined);
  const report: ValidationReport = {
    valid: outcome.ok,
    file_id: fileId,
    nlines: s.nlines,
    ...(format ? { dataset_format: format } : {}),
    dataset_has_sample_weights: s.has_sample_weights,
    dataset_has_message_weights: s.has_message_weights,
    dataset_is_multimodal: s.is_multimodal,
    dataset_has_tools: s.has_tools,
    dataset_has_parallel_tool_calls: s.has_parallel_tool_calls,
    dataset_has_reasoning: s.has_reasoning,
  };
  if (!outcome.ok) {
    report.error_type = 'INVALID_FORMAT';
    report.error = `Line ${outcome.line}: ${outcome.reason}`;
  }
  return report;
}
