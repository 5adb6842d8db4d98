/**
 * What a fine-tuning job costs. The job is charged when training starts, for
 * the exact training and evaluation tokens its own tokenization counted
 * (fine-tunes/estimate.ts billedTokens; a job tokenized before those counts were
 * recorded is counted in full instead). The quote before creation samples the
 * files, so it can differ from the charge. When it ends early (early stopping, cancel,
 * an error), the tokens of the steps and evaluations that did not run are
 * refunded, with a `refund` event on the job.
 */
import Decimal from 'decimal.js';
import { PRODUCTS } from '../shared/pricing';
import type { DatasetFormat } from '../datasets/records';
import { getFileById } from '../db/files';
import { addFineTuneEvent, getFineTuneById } from '../db/fine-tunes';
import { withTransaction, type Db } from '../db/pool';
import { remainingCredit } from '../db/credit';
import { ApplicationFailure } from '@temporalio/common';
import { recordedUnder, recordUsage } from '../db/usage';
import { billedTokens, priceFineTuneJob, priceFromOnePass, type PricedFile } from '../fine-tunes/estimate';
import { findFineTuneModel } from '../fine-tunes/models';
import type { BlobStore } from '../providers/storage/blob-store';

const chargeKey = (jobId: string) => `fine-tune/${jobId}/charge/`;

/**
 * Charges the job its quoted price when training starts, if the organization's remaining credit
 * covers it; otherwise nothing is charged and the job fails (InsufficientCredit) before training.
 */
export async function chargeFineTune(db: Db, blobs: BlobStore, jobId: string): Promise<void> {
  if ((await recordedUnder(db, chargeKey(jobId))).count > 0) return;
  const job = await getFineTuneById(db, jobId);
  const model = job && findFineTuneModel(job.plan.model);
  if (!job || !model) return;
  const priced = async (fileId: string): Promise<PricedFile> => {
    const f = await getFileById(db, fileId);
    if (!f?.validation_report) throw new Error(`file ${fileId} of ${jobId} is gone; cannot price the job`);
    return {
      read: () => blobs.read(f.blob_key),
      bytes: Number(f.bytes),
      format: f.validation_report.dataset_format as DatasetFormat,
    };
  };
  const counts = job.tokenized_counts;
  const price = counts
    ? priceFromOnePass(
        billedTokens(counts.train, job.plan),
        counts.eval ? billedTokens(counts.eval, job.plan) : 0,
        job.plan,
        model,
      )
    : await priceFineTuneJob(
        await priced(job.plan.training_file),
        job.plan.validation_file ? await priced(job.plan.validation_file) : null,
        job.plan,
        model,
        Infinity,
      );
  const trainAmount = price.unitPrice.mul(price.trainTokens).toDecimalPlaces(6, Decimal.ROUND_HALF_UP);
  const common = {
    projectId: job.project_id,
    resourceId: jobId,
    unit: 'token',
    unitPrice: price.unitPrice,
    dimensions: { model: job.plan.model, training_type: job.plan.training_type, method: job.plan.method },
  };
  await withTransaction(db, async (tx) => {
    // One charge at a time per organization: two jobs starting together cannot spend the same credit.
    await tx.query(
      'SELECT 1 FROM organizations WHERE id = (SELECT organization_id FROM projects WHERE id = $1) FOR UPDATE',
      [job.project_id],
    );
    if ((await recordedUnder(tx, chargeKey(jobId))).count > 0) return;
    const remaining = await remainingCredit(tx, job.project_id);
    if (price.total.gt(remaining)) {
      throw ApplicationFailure.nonRetryable(
        `The job costs ${price.total.toFixed()} USD and the organization has ${Decimal.max(remaining, 0).toFixed()} USD of credit left; nothing was charged.`,
        'InsufficientCredit',
      );
    }
    await recordUsage(tx, {
      ...common,
      product: PRODUCTS.fineTuneTrain,
      quantity: price.trainTokens,
      amount: trainAmount,
      idempotencyKey: `${chargeKey(jobId)}train`,
    });
    // The evaluation line takes the rounding remainder, so the two add up to the quoted total exactly.
    if (price.evalTokens === 0) return;
    await recordUsage(tx, {
      ...common,
      product: PRODUCTS.fineTuneEval,
      quantity: price.evalTokens,
      amount: price.total.minus(trainAmount),
      idempotencyKey: `${chargeKey(jobId)}eval`,
    });
  });
}

/** Steps the trainer logged, and evaluations it ran. */
async function progressOf(db: Db, jobId: string): Promise<{ steps: number; evals: number }> {
  const { rows } = await db.query<{ steps: number | null; evals: string }>(
    `SELECT max(step) AS steps, count(eval_loss) AS evals FROM fine_tune_metrics WHERE job_id = $1`,
    [jobId],
  );
  return { steps: rows[0].steps ?? 0, evals: Number(rows[0].evals) };
}

/** Refunds what did not run; a job that ran every step and evaluation gets nothing back. */
export async function refundFineTune(db: Db, jobId: string): Promise<void> {
  const charged = {
    train: await recordedUnder(db, `${chargeKey(jobId)}train`),
    eval: await recordedUnder(db, `${chargeKey(jobId)}eval`),
  };
  if (charged.train.count === 0) return; // never started training: nothing was charged
  const job = await getFineTuneById(db, jobId);
  if (!job) return;
  const done = await progressOf(db, jobId);
  const total = job.total_steps ?? 0;
  const unusedShare = (planned: number, ran: number) =>
    planned > 0 ? new Decimal(Math.max(0, planned - ran)).div(planned) : new Decimal(1);
  const unusedTrain = charged.train.quantity.mul(unusedShare(total, done.steps)).toDecimalPlaces(0, Decimal.ROUND_DOWN);
  const unusedEval = charged.eval.quantity
    .mul(unusedShare(job.plan.n_evals, done.evals))
    .toDecimalPlaces(0, Decimal.ROUND_DOWN);
  const tokens = unusedTrain.plus(unusedEval);
  if (tokens.lte(0)) return;
  const unitPrice = (await unitPriceOf(db, jobId)) ?? new Decimal(0);
  const amount = unitPrice.mul(tokens).toDecimalPlaces(6, Decimal.ROUND_HALF_UP);
  const fresh = await recordUsage(db, {
    projectId: job.project_id,
    product: PRODUCTS.fineTuneRefund,
    resourceId: jobId,
    quantity: tokens.neg(),
    unit: 'token',
    unitPrice,
    amount: amount.neg(),
    dimensions: { model: job.plan.model, training_type: job.plan.training_type, method: job.plan.method },
    idempotencyKey: `fine-tune/${jobId}/refund`,
  });
  if (fresh) {
    await addFineTuneEvent(db, {
      jobId,
      type: 'refund',
      message:
        `Refunded $${amount.toFixed()} for ${tokens.toFixed()} unused tokens ` +
        `(${done.steps} of ${total || '?'} steps and ${done.evals} of ${job.plan.n_evals} evaluations ran).`,
      dedupKey: 'refund',
    });
  }
}

async function unitPriceOf(db: Db, jobId: string): Promise<Decimal | null> {
  const { rows } = await db.query<{ unit_price: string }>(
    'SELECT unit_price FROM usage_records WHERE idempotency_key = $1',
    [`${chargeKey(jobId)}train`],
  );
  return rows[0] ? new Decimal(rows[0].unit_price) : null;
}
