/**
 * POST /fine-tunes/estimate-price: the price of a job before it is created,
 * from the same parameters, the base model's tokenizer and the files' real
 * contents (fine-tunes/estimate.ts says what is counted, and how far the quote
 * reads), with the organization's remaining credit.
 */
import { getFile, type FileRow } from '../../db/files';
import type { ApiDeps } from '../deps';
import type { ApiRouter } from '../route';
import { CreateFineTuneBody } from '../schemas/fine-tunes';
import { resolveCheckpointSource } from '../use-cases/fine-tunes-checkpoint-source';
import { checkFile, quoteFineTune, resolveModel, resolvePlan } from '../use-cases/fine-tunes-plan';
import { EstimateResponse } from '../schemas/fine-tunes';

/** Why a file cannot be estimated yet, in the SDK's words; null when it can. */
function unavailable(file: FileRow | null, which: 'train' | 'eval') {
  if (!file) return null; // a missing file is a 400 from checkFile
  if (file.processing_status === 'INVALID_FORMAT' || file.validation_report?.valid === false)
    return `${which}_file_invalid` as const;
  if (file.processing_status !== 'COMPLETED' || !file.validation_report) return `${which}_file_not_validated` as const;
  if (file.validation_report.dataset_is_multimodal) return 'multimodal_dataset' as const;
  return null;
}

export function addFineTuneEstimateRoute(router: ApiRouter, deps: ApiDeps) {
  const { db } = deps;
  router.add({
    method: 'post',
    path: '/fine-tunes/estimate-price',
    operationId: 'estimateFineTunePrice',
    summary: 'Estimated tokens and price of a fine-tuning job, and the remaining credit',
    tags: ['fine-tuning'],
    body: CreateFineTuneBody,
    response: { status: 200, description: 'The estimate', schema: EstimateResponse },
    handler: async ({ body, principal }) => {
      const training = await getFile(db, principal.projectId, body.training_file);
      const validation = body.validation_file ? await getFile(db, principal.projectId, body.validation_file) : null;
      const reason = unavailable(training, 'train') ?? unavailable(validation, 'eval');
      if (reason) return { estimation_available: false as const, unavailable_reason: reason };

      const source =
        body.from_checkpoint !== undefined && body.model === undefined
          ? await resolveCheckpointSource(db, principal.projectId, body.from_checkpoint)
          : undefined;
      const model = resolveModel(body, source);
      const train = checkFile(training, body.training_file, 'training_file');
      const evalFile = body.validation_file ? checkFile(validation, body.validation_file, 'validation_file') : null;
      const plan = resolvePlan(body, model, train, evalFile, source);

      const { price: job, credit } = await quoteFineTune(
        deps,
        principal.projectId,
        { train, eval: evalFile },
        plan,
        model,
      );
      const { trainTokens, evalTokens, total: price } = job;
      return {
        estimation_available: true as const,
        allowed_to_proceed: price.lte(credit),
        estimated_train_token_count: trainTokens,
        estimated_eval_token_count: evalTokens,
        estimated_total_price: price.toNumber(),
        user_limit: credit.toNumber(),
      };
    },
  });
}
