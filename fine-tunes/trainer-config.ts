/** A job's plan -> the trainer's configuration (trainers/reference/README; the PyTorch trainer reads the same). */
import type { TrainingPlan } from '../shared/fine-tunes';
import type { FineTuneModel } from './models';

export function trainerConfig(
  plan: TrainingPlan,
  model: FineTuneModel,
  paths: {
    trainFile: string;
    validationFile: string | null;
    outputDir: string;
    resumeFrom?: string;
    initFrom?: string;
  },
): Record<string, unknown> & { output_dir: string } {
  const base =
    model.trainer.kind === 'reference'
      ? { model: model.trainer.model, base_seed: model.trainer.base_seed }
      : { hf_repo: model.trainer.hf_repo };
  return {
    ...base,
    training_method: plan.method,
    training_type: plan.training_type,
    lora: plan.lora,
    learning_rate: plan.learning_rate,
    lr_scheduler: plan.lr_scheduler,
    warmup_ratio: plan.warmup_ratio,
    max_grad_norm: plan.max_grad_norm,
    weight_decay: plan.weight_decay,
    n_epochs: plan.n_epochs,
    batch_size: plan.batch_size,
    max_seq_length: plan.max_seq_length,
    n_checkpoints: plan.n_checkpoints,
    n_evals: plan.validation_file ? plan.n_evals : 0,
    early_stopping: plan.early_stopping,
    dpo_beta: plan.dpo_beta,
    dpo_normalize_logratios_by_length: plan.dpo_normalize_logratios_by_length ?? false,
    dpo_reference_free: plan.dpo_reference_free ?? false,
    rpo_alpha: plan.rpo_alpha ?? null,
    simpo_gamma: plan.simpo_gamma ?? null,
    seed: plan.seed,
    train_file: paths.trainFile,
    validation_file: paths.validationFile,
    output_dir: paths.outputDir,
    ...(paths.resumeFrom ? { resume_from: paths.resumeFrom } : {}),
    // from_checkpoint: the weights a new job starts from (a previous job's checkpoint).
    ...(paths.initFrom ? { init_from: paths.initFrom } : {}),
  };
}
