/**
 * The Whisper models an operator provides on a speech host
 * (GANTRY_SPEECH_MODEL_DIR): one CTranslate2 conversion per directory, named
 * after the model, e.g. `whisper-large-v3/` for `openai/whisper-large-v3` (what
 * `ct2-transformers-converter --model openai/whisper-large-v3 --quantization
 * int8 --copy_files tokenizer.json preprocessor_config.json` writes, or a copy
 * of Systran's faster-whisper-large-v3). The speech worker reads it once at
 * start and serves each complete model on that model's own task queue.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { OPERATOR_SPEECH_MODELS, type SpeechModel } from '../../shared/audio';

/** What faster-whisper loads; large-v3 and its turbo use 128 mel bins, which only preprocessor_config.json says. */
function missingFiles(dir: string, model: SpeechModel): string[] {
  const missing = ['model.bin', 'config.json', 'tokenizer.json'].filter((f) => !existsSync(path.join(dir, f)));
  if (!existsSync(path.join(dir, 'vocabulary.json')) && !existsSync(path.join(dir, 'vocabulary.txt')))
    missing.push('vocabulary.json (or vocabulary.txt)');
  if (model.backend.startsWith('whisper-large-v3') && !existsSync(path.join(dir, 'preprocessor_config.json')))
    missing.push('preprocessor_config.json');
  return missing;
}

export interface SpeechModelDirectory {
  /** The models this host serves from the directory. */
  served: SpeechModel[];
  /** Entries that are not served, each with the reason (for the worker's start-up log). */
  ignored: Array<{ entry: string; reason: string }>;
}

export function readSpeechModelDirectory(root: string): SpeechModelDirectory {
  if (!existsSync(root) || !statSync(root).isDirectory())
    throw new Error(`GANTRY_SPEECH_MODEL_DIR ${root} is not a directory`);
  const result: SpeechModelDirectory = { served: [], ignored: [] };
  for (const entry of readdirSync(root).sort()) {
    if (entry.startsWith('.')) continue;
    const model = OPERATOR_SPEECH_MODELS.find((m) => m.backend === entry);
    if (!model) {
      result.ignored.push({
        entry,
        reason: `not a Whisper model name this installation knows (${OPERATOR_SPEECH_MODELS.map((m) => m.backend).join(', ')})`,
      });
      continue;
    }
    const missing = missingFiles(path.join(root, entry), model);
    if (missing.length) result.ignored.push({ entry, reason: `lacks ${missing.join(', ')}` });
    else result.served.push(model);
  }
  return result;
}
