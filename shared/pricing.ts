/**
 * This installation's list prices, in USD, as exact decimal strings (never
 * floats). Operators of a Gantry installation set their own prices here; the
 * figures below are the defaults it ships with. Fine-tuning prices per token
 * live with the fine-tunable models (fine-tunes/models.ts), where the estimate
 * reads them too, and so do the serverless prices per token of the catalog
 * models the platform's pools serve.
 */
import Decimal from 'decimal.js';
import type { NodeCapacity } from './clusters';
import type { GpuType } from './gpu-types';

/** How a cluster's GPUs are paid for, by the capacity each node came from. */
export const CAPACITY_BILLING: Record<NodeCapacity, { billingType: string; product: string }> = {
  reserved: { billingType: 'RESERVED', product: 'GPU Clusters - Reserved GPU Hours (prepaid)' },
  on_demand: { billingType: 'ON_DEMAND', product: 'GPU Clusters - On-Demand GPU Hours' },
  capacity_pool: { billingType: 'CAPACITY_POOL', product: 'GPU Clusters - Capacity Pool GPU Hours' },
  preemptible: { billingType: 'PREEMPTIBLE', product: 'GPU Clusters - Preemptible GPU Hours' },
};

/** Price of one GPU-hour by GPU type and capacity. */
export const GPU_HOUR_PRICES: Record<GpuType, Record<NodeCapacity, string>> = {
  H100_SXM: { reserved: '1.75', on_demand: '2.99', capacity_pool: '2.20', preemptible: '1.40' },
  H100_SXM_INF: { reserved: '1.75', on_demand: '2.99', capacity_pool: '2.20', preemptible: '1.40' },
  H200_SXM: { reserved: '2.09', on_demand: '3.79', capacity_pool: '2.60', preemptible: '1.70' },
  B200_SXM: { reserved: '3.50', on_demand: '5.50', capacity_pool: '4.20', preemptible: '2.80' },
  B300_SXM: { reserved: '4.20', on_demand: '6.60', capacity_pool: '5.00', preemptible: '3.30' },
  RTX_6000_PCI: { reserved: '0.70', on_demand: '1.20', capacity_pool: '0.90', preemptible: '0.55' },
  L40_PCIE: { reserved: '0.60', on_demand: '1.00', capacity_pool: '0.80', preemptible: '0.45' },
};

/** Container deployment replicas (custom containers and dedicated endpoints), per replica-hour, by GPUs per replica. */
export const REPLICA_HOUR_PRICES = { cpu: '0.10', perGpu: '2.99' } as const;

export function replicaHourPrice(gpuCount: number): string {
  return gpuCount > 0 ? new Decimal(REPLICA_HOUR_PRICES.perGpu).mul(gpuCount).toString() : REPLICA_HOUR_PRICES.cpu;
}

/**
 * Audio, per minute of audio processed, by speech model: those shipped on PyPI and those an
 * operator may provide (shared/audio.ts; a test holds this table to both lists).
 */
export const AUDIO_MINUTE_PRICES: Record<string, string> = {
  'openai/whisper-base': '0.0015',
  'openai/whisper-tiny.en': '0.0010',
  'openai/whisper-tiny': '0.0010',
  'openai/whisper-base.en': '0.0015',
  'openai/whisper-small': '0.0015',
  'openai/whisper-small.en': '0.0015',
  'openai/whisper-medium': '0.0015',
  'openai/whisper-medium.en': '0.0015',
  'openai/whisper-large-v1': '0.0015',
  'openai/whisper-large-v2': '0.0015',
  'openai/whisper-large-v3': '0.0015',
  'openai/whisper-large-v3-turbo': '0.0015',
};

/**
 * Dedicated endpoints are paid by the replica-hour of their deployments; the
 * tokens they serve are recorded per endpoint, priced at zero.
 */
export const DEDICATED_TOKEN_PRICE = '0';

export const PRODUCTS = {
  fineTuneTrain: 'Fine-tuning - Training Tokens',
  fineTuneEval: 'Fine-tuning - Evaluation Tokens',
  fineTuneRefund: 'Fine-tuning - Refund of Unused Tokens',
  replicaHours: 'Container Deployments - Replica Hours',
  inputTokens: 'Dedicated Inference - Input Tokens',
  outputTokens: 'Dedicated Inference - Output Tokens',
  serverlessInputTokens: 'Serverless Inference - Input Tokens',
  serverlessOutputTokens: 'Serverless Inference - Output Tokens',
  transcription: 'Audio - Transcription Minutes',
  translation: 'Audio - Translation Minutes',
  // Batches and evaluations: the tokens of their calls, at the prices of the calls they make.
  batchInputTokens: 'Batch Inference - Input Tokens',
  batchOutputTokens: 'Batch Inference - Output Tokens',
  // A batch's audio lines: their minutes, at the audio prices.
  batchTranscription: 'Batch Inference - Transcription Minutes',
  batchTranslation: 'Batch Inference - Translation Minutes',
  evaluationInputTokens: 'Evaluations - Input Tokens',
  evaluationOutputTokens: 'Evaluations - Output Tokens',
} as const;
