/**
 * Base models that can be fine-tuned here, with their limits (the SDK's
 * FinetuneModelLimits), the accelerator type their training runs on, their
 * tokenizer and the trainer's model configuration.
 *
 * Only the reference model is listed: it is the one whose trainer and weights
 * exist on this installation. Catalog entries for the spec's larger families
 * come with a trainer that can train them.
 */
import type { GpuType } from '../common/gpu-types';
import { ByteTokenizer, type Tokenizer } from './tokenizer';

export interface FineTuneModel {
  name: string;
  gpuType: GpuType;
  tokenizer: () => Tokenizer;
  /** The trainer's model configuration and the seed its base weights come from. */
  trainer: {
    model: {
      vocab_size: number;
      d_model: number;
      n_layers: number;
      n_heads: number;
      d_ff: number;
      max_seq_len: number;
    };
    base_seed: number;
  };
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
      model: { vocab_size: 260, d_model: 64, n_layers: 2, n_heads: 4, d_ff: 128, max_seq_len: 256 },
      base_seed: 0,
    },
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
];

export function findFineTuneModel(name: string): FineTuneModel | undefined {
  return FINE_TUNE_MODELS.find((m) => m.name === name);
}
