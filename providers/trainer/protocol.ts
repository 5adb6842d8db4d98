/**
 * The trainer line protocol (trainers/reference/gantry_trainer/protocol.py):
 * one JSON object per line on the trainer's stdout.
 */
export type TrainerEvent =
  | {
      event: 'start';
      total_steps: number;
      steps_per_epoch: number;
      n_epochs: number;
      trainable_params: number;
      resumed_from_step: number | null;
    }
  | {
      event: 'step';
      step: number;
      epoch: number;
      loss: number;
      lr: number;
      grad_norm: number;
      tokens: number;
      reward_margin?: number;
    }
  | { event: 'eval'; step: number; eval_loss: number }
  | { event: 'epoch'; epoch: number; step: number }
  | { event: 'checkpoint'; step: number; epoch: number; path: string; file: string }
  | { event: 'early_stopped'; step: number; best_step: number; best_metric: number }
  | { event: 'cancelled'; step: number }
  | {
      event: 'done';
      step: number;
      output_dir: string;
      files: string[];
      early_stopped: boolean;
      best_step?: number;
      best_metric?: number;
    }
  | { event: 'error'; message: string };

export function parseTrainerLine(line: string): TrainerEvent | null {
  if (!line.trim()) return null;
  const value = JSON.parse(line) as TrainerEvent;
  if (typeof value !== 'object' || value === null || typeof value.event !== 'string') {
    throw new Error(`not a trainer protocol line: ${line.slice(0, 200)}`);
  }
  return value;
}
