/**
 * How an endpoint deployment is served: which model server can serve its
 * model, and the container deployment that runs it.
 *
 * - The reference model server (trainers/reference/gantry_trainer/serve.py)
 *   serves the reference model family: registry revisions the reference
 *   trainer wrote (fine-tunes of `gantry/reference-byte-tiny`) and the catalog
 *   base itself (its weights come from the catalog's seed).
 * - The PyTorch model server (trainers/torch/gantry_torch_trainer/serve.py,
 *   transformers; the same HTTP contract) serves the torch catalog bases whose
 *   weights this installation installs into GANTRY_MODEL_DIR (weightsInstalled),
 *   registry models fine-tuned from them (full weights over the base's
 *   architecture and tokenizer), and LoRA adapters of them attached at run
 *   time. The base's installed directory is mounted read-only into each
 *   replica at BASE_MOUNT_PATH (a catalog mount: providers/containers/catalog-weights.ts).
 *
 * Other catalog families have no weights on this installation, and say so.
 */
import type { GantryConfig } from '../platform/config';
import type { DeploymentSpec } from '../shared/deployments';
import type { Queryable } from '../db/pool';
import { findRegistryModelsByName, getRegistryModel, listRevisions, type RegistryModelRow } from '../db/models';
import { FINE_TUNE_MODELS, findCatalogModel, weightsInstalled } from '../fine-tunes/models';
import { REFERENCE_TRAINER_DIR, TRAINER_PACKAGES } from '../providers/trainer/process-trainer';
import {
  MODEL_SERVER_PYTHON,
  MODEL_SERVER_PYTHONPATH,
  TORCH_MODEL_SERVER_PYTHON,
  TORCH_MODEL_SERVER_PYTHONPATH,
} from '../shared/model-server-image';

/** The endpoint autoscaling of the SDK (DeploymentAutoscaling). */
export interface EndpointAutoscaling {
  minReplicas?: number;
  maxReplicas?: number;
  scaleDownWindow?: string;
  scaleToZeroWindow?: string;
  scaleUpWindow?: string;
  scalingMetrics?: Array<{ name: string; target: number; type: string; percentile?: string }>;
}

export type ServingPlan =
  | {
      servable: true;
      model: string;
      modelId: string;
      revisionId?: string;
      /** The catalog base whose deployment profiles (configs) apply. */
      family: string;
      /** Which model server: the reference one (JAX) or the PyTorch one (transformers). */
      server: ModelServerKind;
      /** The server's arguments after `python -m <its module>`. */
      args: string[];
      mounts: NonNullable<DeploymentSpec['model_mounts']>;
    }
  | { servable: false; model: string; modelId: string; revisionId?: string; reason: string };

/**
 * The container deployment that serves an endpoint deployment is named after it; container names
 * take no `_`, deployment ids (`dep_<uuid>`, as the SDKs and the Python CLI recognize them) do.
 */
export const servingContainerName = (deploymentId: string) => deploymentId.replaceAll('_', '-');

/** The model servers run on CPU (JAX_PLATFORMS=cpu; torch on CPU): their replicas hold no GPU, and are billed so. */
export const MODEL_SERVER_GPUS = 0;

const REFERENCE_BASE = 'gantry/reference-byte-tiny';

export type ModelServerKind = 'reference' | 'torch';

/** Where a torch model server's replicas see their catalog base's installed directory (read-only). */
export const BASE_MOUNT_PATH = '/base';

/** The PyTorch model server's arguments and mounts for a catalog base, and a full fine-tune of it at /model. */
function torchServing(base: string, name: string, fineTune?: { modelId: string; revisionId: string }) {
  return {
    server: 'torch' as const,
    args: [
      '--base-dir',
      BASE_MOUNT_PATH,
      ...(fineTune ? ['--model-dir', '/model'] : []),
      '--hf-repo',
      base,
      '--name',
      name,
    ],
    // A catalog mount names the catalog model and no revision: the host mounts its installed
    // directory (tenants' own model mounts always name a revision of a registered model).
    mounts: [
      { model_id: base, mount_path: BASE_MOUNT_PATH },
      ...(fineTune ? [{ model_id: fineTune.modelId, revision_id: fineTune.revisionId, mount_path: '/model' }] : []),
    ],
  };
}

/** What to serve for `modelId` (a registry model of the project, or a catalog base model); null if unknown. */
export async function planServing(
  db: Queryable,
  projectId: string,
  modelId: string,
  revisionId?: string,
): Promise<ServingPlan | null> {
  const base = findCatalogModel(modelId);
  if (base) {
    if (weightsInstalled(base)) {
      return {
        servable: true,
        family: base.name,
        model: base.name,
        modelId: base.name,
        ...torchServing(base.name, base.name),
      };
    }
    if (base.trainer.kind !== 'reference') {
      return {
        servable: false,
        model: base.name,
        modelId: base.name,
        reason: `No weights for ${base.name} on this installation: its model server needs the ${base.trainer.hf_repo} weights and a GPU model server, which this installation does not have.`,
      };
    }
    return {
      servable: true,
      family: base.name,
      model: base.name,
      modelId: base.name,
      server: 'reference',
      args: [
        '--base-config',
        JSON.stringify(base.trainer.model),
        '--base-seed',
        String(base.trainer.base_seed),
        '--name',
        base.name,
      ],
      mounts: [],
    };
  }
  const model: RegistryModelRow | undefined =
    (await getRegistryModel(db, projectId, modelId)) ?? (await findRegistryModelsByName(db, projectId, modelId))[0];
  if (!model) return null;
  const name = `projects/${projectId}/models/${model.id}`;
  const usable = (await listRevisions(db, model.id)).filter(
    (r) => r.validation_status === 'REVISION_VALIDATION_STATUS_SUCCESS',
  );
  const revision = revisionId ? usable.find((r) => r.id === revisionId) : usable[0];
  if (!revision) {
    return {
      servable: false,
      model: name,
      modelId: model.id,
      revisionId,
      reason: revisionId
        ? `Model ${model.id} has no usable revision ${revisionId}.`
        : `Model ${model.id} has no weights yet.`,
    };
  }
  if (model.weights_type !== 'WEIGHTS_TYPE_DEFAULT') {
    return {
      servable: false,
      model: name,
      modelId: model.id,
      revisionId: revision.id,
      reason: `Model ${model.id} is an adapter: deploy its base model and attach it as an adapter.`,
    };
  }
  const family = model.base_model ? findCatalogModel(model.base_model) : undefined;
  if (family && weightsInstalled(family)) {
    return {
      servable: true,
      family: family.name,
      model: name,
      modelId: model.id,
      revisionId: revision.id,
      ...torchServing(family.name, model.id, { modelId: model.id, revisionId: revision.id }),
    };
  }
  if (model.base_model !== REFERENCE_BASE) {
    return {
      servable: false,
      model: name,
      modelId: model.id,
      revisionId: revision.id,
      reason: `No model server on this installation serves models derived from ${model.base_model ?? 'an unknown base'}; the reference model server serves ${REFERENCE_BASE} and its fine-tunes, the PyTorch one ${FINE_TUNE_MODELS.filter(
        weightsInstalled,
      )
        .map((m) => m.name)
        .join(', ')} and theirs.`,
    };
  }
  return {
    servable: true,
    family: REFERENCE_BASE,
    model: name,
    modelId: model.id,
    revisionId: revision.id,
    server: 'reference',
    args: ['--model-dir', '/model', '--name', model.id],
    mounts: [{ model_id: model.id, revision_id: revision.id, mount_path: '/model' }],
  };
}

/** `300s`, `5m` or a bare number of seconds, as whole minutes (at least `min`). */
function windowMinutes(window: string | undefined, fallback: number, min: number): number {
  if (!window) return fallback;
  const m = /^(\d+(?:\.\d+)?)(s|m)?$/.exec(window.trim());
  if (!m) return fallback;
  const seconds = Number(m[1]) * (m[2] === 'm' ? 60 : 1);
  return Math.max(min, Math.round(seconds / 60));
}

/** Profile selectors the model servers (both take these arguments) act on, and the arguments they become. */
export const PROFILE_SELECTORS: Record<
  string,
  { check: (v: string) => boolean; rule: string; args: (v: string) => string[] }
> = {
  dtype: {
    check: (v) => v === 'float32' || v === 'bfloat16',
    rule: 'float32 or bfloat16',
    args: (v) => ['--dtype', v],
  },
  max_tokens_limit: {
    check: (v) => /^[1-9]\d{0,5}$/.test(v),
    rule: 'a whole number of tokens, 1 to 999999',
    args: (v) => ['--max-tokens-limit', v],
  },
};
/** Selectors that describe where a profile runs (informational on this installation). */
export const DESCRIPTIVE_SELECTORS = ['engine', 'hardware'];

export function profileArgs(selectors: Array<{ key: string; value: string }>): string[] {
  return selectors.flatMap((s) => PROFILE_SELECTORS[s.key]?.args(s.value) ?? []);
}

/**
 * What runs the model server: its image (GANTRY_MODEL_SERVER_IMAGE for the reference server,
 * GANTRY_TORCH_MODEL_SERVER_IMAGE for the PyTorch one; scripts/build-model-server-image.ts builds
 * both), or, without one, this installation's own Python for that server (GANTRY_TRAINER_PYTHON,
 * GANTRY_TORCH_TRAINER_PYTHON) as a host process (the process runtime only; the image is then a
 * name and nothing more).
 */
function modelServerProgram(
  config: GantryConfig,
  plan: Extract<ServingPlan, { servable: true }>,
): Pick<DeploymentSpec, 'image' | 'command' | 'environment_variables'> {
  const torch = plan.server === 'torch';
  const configured = torch ? config.torchModelServerImage : config.modelServerImage;
  const [image, python, code] = configured
    ? torch
      ? [configured, TORCH_MODEL_SERVER_PYTHON, TORCH_MODEL_SERVER_PYTHONPATH]
      : [configured, MODEL_SERVER_PYTHON, MODEL_SERVER_PYTHONPATH]
    : torch
      ? // Without the torch trainer's Python the replica fails to start, saying torch is missing.
        ['gantry/torch-model-server', config.torchTrainerPython ?? config.trainerPython, TRAINER_PACKAGES.torch.dir]
      : ['gantry/reference-model-server', config.trainerPython, REFERENCE_TRAINER_DIR];
  return {
    image,
    command: [
      python,
      '-m',
      `${torch ? TRAINER_PACKAGES.torch.module : TRAINER_PACKAGES.reference.module}.serve`,
      ...plan.args,
    ],
    environment_variables: [
      { name: 'PYTHONPATH', value: code },
      ...(torch
        ? // Weights come from the mounted model directory only; no hub is ever asked.
          [
            { name: 'HF_HUB_OFFLINE', value: '1' },
            { name: 'TRANSFORMERS_OFFLINE', value: '1' },
          ]
        : [{ name: 'JAX_PLATFORMS', value: 'cpu' }]),
      // In its container it listens on every address of its own network (where its port is
      // published from); the Gantry image, unlike the model server's, does not say so itself.
      ...(configured ? [{ name: 'HOST', value: '0.0.0.0' }] : []),
    ],
  };
}

/** The container deployment that serves an endpoint deployment. */
export function modelServerSpec(
  config: GantryConfig,
  d: { containerName: string; plan: Extract<ServingPlan, { servable: true }>; autoscaling: EndpointAutoscaling },
): DeploymentSpec {
  const min = d.autoscaling.minReplicas ?? 1;
  const max = Math.max(d.autoscaling.maxReplicas ?? Math.max(min, 1), min);
  const inflight = d.autoscaling.scalingMetrics?.find((m) => m.name === 'inflight_requests');
  // The window a scale-down must agree over: a gauge may use none (down once the cool-down
  // has passed); a request count needs at least a minute to count in.
  const window = d.autoscaling.scaleDownWindow ?? d.autoscaling.scaleToZeroWindow;
  return {
    name: d.containerName,
    description: `Model server for ${d.plan.model}`,
    ...modelServerProgram(config, d.plan),
    port: 8000,
    health_check_path: '/health',
    gpu_type: 'h100-80gb',
    gpu_count: MODEL_SERVER_GPUS,
    min_replicas: min,
    max_replicas: max,
    termination_grace_period_seconds: 5,
    model_mounts: d.plan.mounts,
    autoscaling: inflight
      ? {
          metric: 'CustomMetric',
          custom_metric_name: 'gantry_model_requests_inflight',
          target: inflight.target,
          time_interval_minutes: windowMinutes(window, 5, 0),
        }
      : { metric: 'HTTPTotalRequests', target: 60, time_interval_minutes: windowMinutes(window, 5, 1) },
  };
}
