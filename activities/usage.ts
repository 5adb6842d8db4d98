/**
 * Usage that workflows record on the control queue: audio minutes at the end
 * of a request, and the usage-metering schedule that turns open GPU-hour and
 * replica-hour intervals into ledger records while they stay open.
 */
import Decimal from 'decimal.js';
import type { AudioTask } from '../shared/audio';
import type { WorkTag } from '../shared/work-tag';
import { AUDIO_MINUTE_PRICES, PRODUCTS } from '../shared/pricing';
import type { Db } from '../db/pool';
import { meterOpenIntervals, recordUsage } from '../db/usage';

export function createUsageActivities({ db }: { db: Db }) {
  return {
    /** One transcription or translation: its audio's minutes at the model's price. */
    async recordAudioUsage(a: {
      requestId: string;
      projectId: string;
      model: string;
      task: AudioTask;
      durationSeconds: number;
      /** The batch that made the request: billed as that batch's usage, at the same price. */
      work?: WorkTag;
    }): Promise<void> {
      const price = AUDIO_MINUTE_PRICES[a.model];
      if (price === undefined) throw new Error(`no audio price for ${a.model} in shared/pricing.ts`);
      const translate = a.task === 'translate';
      await recordUsage(db, {
        projectId: a.projectId,
        ...(a.work
          ? {
              product: translate ? PRODUCTS.batchTranslation : PRODUCTS.batchTranscription,
              resourceId: a.work.id,
              dimensions: { model: a.model, [`${a.work.kind}_of`]: a.requestId },
            }
          : {
              product: translate ? PRODUCTS.translation : PRODUCTS.transcription,
              resourceId: a.requestId,
              dimensions: { model: a.model },
            }),
        quantity: new Decimal(a.durationSeconds).div(60).toDecimalPlaces(6, Decimal.ROUND_HALF_UP),
        unit: 'minute',
        unitPrice: price,
        idempotencyKey: `audio/${a.requestId}`,
      });
    },

    /** Meters every open interval up to now; returns how many it visited. */
    async meterOpenUsage(): Promise<number> {
      return meterOpenIntervals(db);
    },
  };
}

export type UsageActivities = ReturnType<typeof createUsageActivities>;
