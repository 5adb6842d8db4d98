/**
 * A catalog model's installed weights on a container host: GANTRY_MODEL_DIR/<hf_repo> (config,
 * safetensors, tokenizer, chat template; ./dev installs them), mounted read-only into the replicas
 * of the model servers that serve it (api/endpoint-serving.ts: a model mount that names a catalog
 * model and no revision). The directory comes from the catalog's own entry, never from a path a
 * tenant gave, and the mount is read-only (podman `:ro`; the process runtime links it).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';

import { findCatalogModel } from '../../fine-tunes/models';

/** The host directory of the catalog model's installed weights; an Error saying why there is none. */
export function catalogWeightsDir(modelDir: string, name: string): string | Error {
  const model = findCatalogModel(name);
  if (!model || model.trainer.kind !== 'torch')
    return new Error(`${name} is not a catalog model with installed weights`);
  const dir = path.join(modelDir, ...model.trainer.hf_repo.split('/'));
  if (!existsSync(path.join(dir, 'config.json')) || !existsSync(path.join(dir, 'model.safetensors'))) {
    return new Error(
      `the weights of ${model.name} are not installed on this host (${dir}: run ./dev up, which installs them)`,
    );
  }
  return dir;
}
