/**
 * The speech models this installation serves now: the ones shipped on PyPI,
 * which every speech host has, and each model an operator provided on some
 * speech host (GANTRY_SPEECH_MODEL_DIR). A host that has such a model polls
 * the model's own task queue (recognitionTaskQueue), so Temporal's list of that
 * queue's pollers is the record of who serves it: nothing to register, and a
 * host that goes away drops out by itself.
 */
import type { Client } from '@temporalio/client';
import {
  DEFAULT_SPEECH_MODEL,
  OPERATOR_SPEECH_MODELS,
  PREFERRED_DEFAULT_SPEECH_MODEL,
  SPEECH_MODELS,
  type SpeechModel,
} from '../shared/audio';
import { describeTaskQueuePollers } from '../platform/temporal';
import { recognitionTaskQueue } from '../shared/task-queues';

/** How long one reading of the queues is reused: a model a host starts serving is listed within this. */
const FRESH_MS = 3000;
/**
 * A host whose every slot is busy with long chunks does not poll, so a model stays served for a
 * while after the last poll Temporal remembers (its poller history is kept for minutes). A host
 * that really went away fails the requests sent meanwhile after the audio workflow's 2-minute
 * schedule-to-start timeout, with a 503, not a 404 that a busy host would not deserve.
 */
const SERVED_WITHIN_MS = 10 * 60_000;

export class ServedSpeechModels {
  private reading?: { at: number; models: Promise<SpeechModel[]> };

  constructor(private readonly temporal: Client) {}

  /** The models a request may name now, bundled first. */
  list(): Promise<SpeechModel[]> {
    if (!this.reading || Date.now() - this.reading.at > FRESH_MS) {
      const reading = { at: Date.now(), models: this.read() };
      this.reading = reading;
      // A failed reading is not kept: the next call asks Temporal again.
      reading.models.catch(() => {
        if (this.reading === reading) this.reading = undefined;
      });
    }
    return this.reading.models;
  }

  async find(id: string): Promise<SpeechModel | undefined> {
    return (await this.list()).find((m) => m.id === id);
  }

  /** The model a request without `model` gets: the SDKs' typed model where a host serves it. */
  async defaultModel(): Promise<string> {
    return (await this.find(PREFERRED_DEFAULT_SPEECH_MODEL)) ? PREFERRED_DEFAULT_SPEECH_MODEL : DEFAULT_SPEECH_MODEL;
  }

  private async read(): Promise<SpeechModel[]> {
    const now = Date.now();
    const queues = await Promise.all(
      OPERATOR_SPEECH_MODELS.map((m) =>
        describeTaskQueuePollers(this.temporal, recognitionTaskQueue(m), {
          now,
          types: ['activity'],
          liveWithinMs: SERVED_WITHIN_MS,
        }),
      ),
    );
    return [...SPEECH_MODELS, ...OPERATOR_SPEECH_MODELS.filter((_, i) => queues[i].activity_pollers > 0)];
  }
}
