/**
 * POST /v1/fine-tunes/preview: what tokenization will make of the first rows
 * of a training file (the SDK's fineTuning.preview): tokens after truncation,
 * which are trained, and the first token strings.
 */
import { createInterface } from 'node:readline';
import type { DatasetFormat } from '../../datasets/records';
import { getFile } from '../../db/files';
import { encodeSample, segmentsOf, trainedSpans } from '../../fine-tunes/tokenize';
import type { ApiDeps } from '../deps';
import { badRequest } from '../errors';
import type { ApiRouter } from '../route';
import { checkFile, resolveModel } from '../use-cases/fine-tunes-plan';
import { PreviewBody, PreviewResponse } from '../schemas/fine-tunes';

/** How much of a training file a preview reads (and tokenizes, inside the request) at most. */
export const PREVIEW_MAX_BYTES = 4 * 1024 * 1024;

export function addFineTunePreviewRoute(router: ApiRouter, deps: ApiDeps) {
  router.add({
    method: 'post',
    path: '/fine-tunes/preview',
    operationId: 'previewFineTuneTokenization',
    summary: 'How the first top_k rows of a training file will be tokenized and trained',
    tags: ['fine-tuning'],
    body: PreviewBody,
    strict: true,
    response: { status: 200, description: 'Tokenized rows', schema: PreviewResponse },
    handler: async ({ body, principal }) => {
      const model = resolveModel({ model: body.model, training_file: body.training_file });
      const file = checkFile(
        await getFile(deps.db, principal.projectId, body.training_file),
        body.training_file,
        'training_file',
      );
      const format = file.validation_report!.dataset_format as DatasetFormat;
      if (format === 'PREFERENCE_OPENAI') {
        throw badRequest('The preview shows SFT tokenization; this is a preference (DPO) dataset.', 'training_file');
      }
      const tokenizer = model.tokenizer();
      const maxSeqLength = model.limits.max_seq_length_sft;
      // `auto`: text datasets train on everything, messages and prompt/completion only on outputs.
      const trainOnInputs = body.train_on_inputs ?? format === 'GENERAL';
      const rows = [];
      // The preview tokenizes inside the request: it reads the file's first PREVIEW_MAX_BYTES only.
      // Past them the last line read may be cut short, so it is left out.
      const fileBytes = Number(file.bytes);
      const capped = fileBytes > PREVIEW_MAX_BYTES;
      const input = deps.blobs.read(file.blob_key, { start: 0, end: Math.min(fileBytes, PREVIEW_MAX_BYTES) - 1 });
      const lines = createInterface({ input, crlfDelay: Infinity })[Symbol.asyncIterator]();
      let lineNo = 0;
      for (let next = await lines.next(); !next.done;) {
        const raw: string = next.value;
        next = await lines.next();
        if (next.done && capped) break;
        lineNo++;
        const line = raw.replace(/^\uFEFF/, '');
        if (!line.trim()) continue;
        const { ids, mask } = encodeSample(segmentsOf(JSON.parse(line), format, tokenizer.chat), {
          tokenizer,
          format,
          maxSeqLength,
          trainOnInputs,
        });
        const truncated = ids.length > maxSeqLength;
        const keptIds = ids.slice(0, maxSeqLength);
        const keptMask = mask.slice(0, maxSeqLength);
        rows.push({
          row_index: lineNo,
          input_ids: keptIds,
          labels: keptIds.map((id, i) => (keptMask[i] ? id : -100)),
          num_tokens: keptIds.length,
          num_trained_tokens: keptMask.reduce((a, b) => a + b, 0),
          tokens: keptIds.slice(0, 32).map((id) => tokenizer.tokenString(id)),
          trained_spans: trainedSpans(keptMask),
          truncated,
        });
        if (rows.length === body.top_k) break;
      }
      await lines.return?.();
      input.destroy();
      if (!rows.length && capped) {
        throw badRequest(
          `The first row of the file is longer than the ${PREVIEW_MAX_BYTES} bytes a preview reads.`,
          'training_file',
        );
      }
      return {
        model: model.name,
        dataset_format: format.toLowerCase() as 'general' | 'conversation' | 'instruction',
        max_seq_length: maxSeqLength,
        train_on_inputs: trainOnInputs,
        rows,
      };
    },
  });
}
