/**
 * The speech models this installation serves now: the ones shipped on PyPI,
 * which every speech host has, and each model an operator provided on a
 * speech host (GANTRY_SPEECH_MODEL_DIR) that some live host announces
 * (db/speech-hosts.ts). A host that stops withdraws its models at once; one
 * that died drops out when its last announcement is too old, and the requests
 * sent to it meanwhile fail with a 503 after the audio workflow's host wait.
 */
import type { Db } from '../db/pool';
import { announcedSpeechModels } from '../db/speech-hosts';
import {
  DEFAULT_SPEECH_MODEL,
  OPERATOR_SPEECH_MODELS,
  PREFERRED_DEFAULT_SPEECH_MODEL,
  SPEECH_MODELS,
  type SpeechModel,
} from '../shared/audio';

export class ServedSpeechModels {
  constructor(private readonly db: Db) {}

  /** The models a request may name now, bundled first. */
  async list(): Promise<SpeechModel[]> {
    const announced = await announcedSpeechModels(this.db);
    return [...SPEECH_MODELS, ...OPERATOR_SPEECH_MODELS.filter((m) => announced.has(m.id))];
  }

  async find(id: string): Promise<SpeechModel | undefined> {
    return (await this.list()).find((m) => m.id === id);
  }

  /** The model a request without `model` gets: the SDKs' typed model where a host serves it. */
  async defaultModel(): Promise<string> {
    return (await this.find(PREFERRED_DEFAULT_SPEECH_MODEL)) ? PREFERRED_DEFAULT_SPEECH_MODEL : DEFAULT_SPEECH_MODEL;
  }
}
