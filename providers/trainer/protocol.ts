/**
 * The trainer line protocol (trainers/reference/gantry_trainer/protocol.py): one JSON object per
 * line on the trainer's stdout, parsed here with a schema so a trainer that breaks the protocol is
 * caught at the line it printed, not later as an undefined field. The reference trainer's tests
 * (test/trainers/) run its real emitters through this parser; test/trainers/trainer-protocol.test.ts
 * checks what it refuses.
 */
import { z } from 'zod';

const Step = z.number().int().nonnegative();
/** A measured value; the trainer writes a non-finite one (a diverged loss) as null. */
const Measure = z.number().nullable();

export const TrainerEventSchema = z.discriminatedUnion('event', [
  z.object({
    event: z.literal('start'),
    total_steps: Step,
    steps_per_epoch: Step,
    n_epochs: Step,
    trainable_params: Step,
    resumed_from_step: Step.nullable(),
  }),
  z.object({
    event: z.literal('step'),
    step: Step,
    epoch: z.number(),
    loss: Measure,
    lr: z.number(),
    grad_norm: Measure,
    tokens: Step,
    reward_margin: Measure.optional(),
  }),
  z.object({ event: z.literal('eval'), step: Step, eval_loss: Measure }),
  z.object({ event: z.literal('epoch'), epoch: Step, step: Step }),
  z.object({ event: z.literal('checkpoint'), step: Step, epoch: z.number(), path: z.string(), file: z.string() }),
  z.object({ event: z.literal('early_stopped'), step: Step, best_step: Step, best_metric: Measure }),
  z.object({ event: z.literal('cancelled'), step: Step }),
  z.object({
    event: z.literal('done'),
    step: Step,
    output_dir: z.string(),
    files: z.array(z.string()),
    early_stopped: z.boolean(),
    best_step: Step.nullable().optional(),
    best_metric: Measure.optional(),
  }),
  z.object({ event: z.literal('error'), message: z.string() }),
]);
export type TrainerEvent = z.infer<typeof TrainerEventSchema>;

const KNOWN_EVENTS = new Set<string>(TrainerEventSchema.options.map((o) => o.shape.event.value));

/** A line that is not the protocol: what was wrong with it, for the job's error. */
export class TrainerProtocolError extends Error {}

/** One stdout line: its event, or null for a blank line or an unknown event; throws TrainerProtocolError for anything else. */
export function parseTrainerLine(line: string): TrainerEvent | null {
  if (!line.trim()) return null;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw new TrainerProtocolError(`the trainer printed a line that is not JSON: ${line.slice(0, 200)}`);
  }
  // An event this side does not know yet (a newer trainer) is skipped, as before the schema: the
  // protocol may grow. A known event with a missing or mistyped field is a broken trainer.
  const name = (value as { event?: unknown } | null)?.event;
  if (typeof name === 'string' && !KNOWN_EVENTS.has(name)) return null;
  const parsed = TrainerEventSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new TrainerProtocolError(
      `the trainer printed a line that breaks the protocol (${issue.path.join('.') || 'event'}: ${issue.message}): ${line.slice(0, 200)}`,
    );
  }
  return parsed.data;
}
