/** The model registry (spec: Models; the SDK's v2 models, revisions and uploads): what the API takes and answers. */
import { z } from 'zod';
import { ProjectParams, ResourceId } from './common';

export const UploadParams = ProjectParams.extend({ id: ResourceId });

export const UploadSchema = z
  .object({
    id: z.string(),
    createdAt: z.string(),
    modelId: z.string(),
    projectId: z.string(),
    remoteUrl: z.string(),
    status: z.enum([
      'REMOTE_UPLOAD_STATUS_PENDING',
      'REMOTE_UPLOAD_STATUS_RUNNING',
      'REMOTE_UPLOAD_STATUS_ERROR',
      'REMOTE_UPLOAD_STATUS_SUCCEEDED',
      'REMOTE_UPLOAD_STATUS_FAILED',
    ]),
    maxRestarts: z.number().int(),
    restartCount: z.number().int(),
    statusMessage: z.string().optional(),
    revisionId: z.string().optional(),
    updatedAt: z.string(),
  })
  .meta({ id: 'RemoteUpload' });

export const Visibility = z.enum(['VISIBILITY_PRIVATE', 'VISIBILITY_INTERNAL']);
export const BareName = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
export const ModelParams = ProjectParams.extend({ id: ResourceId });

export const ModelSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    organizationId: z.string(),
    projectId: z.string(),
    visibility: Visibility,
    weights: z.object({
      type: z.enum(['WEIGHTS_TYPE_DEFAULT', 'WEIGHTS_TYPE_SPECULATOR', 'WEIGHTS_TYPE_ADAPTER']),
      architecture: z.string().optional(),
      contextLength: z.string().optional(),
      parameters: z
        .object({ total: z.string(), byDtype: z.array(z.object({ count: z.string(), dtype: z.string() })) })
        .optional(),
    }),
    baseModelId: z.string().optional(),
    description: z.string().optional(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'RegistryModel' });

/**
 * A way to deploy the model (the SDK's SupportedModelDeploymentProfile): one per deployment
 * profile (config) of its family that this installation can serve. The Python CLI deploys a
 * catalog model by its `model` and `config`.
 */
const DeploymentProfileSchema = z.object({
  profileId: z.string(),
  certifiedConfigRevisionId: z.string(),
  certifiedModelRevisionId: z.string(),
  config: z.string(),
  model: z.string(),
  modelName: z.string(),
  gpuCount: z.number().int(),
  gpuType: z.string(),
  parallelism: z.string(),
  quantization: z.string(),
  performanceBenchmarks: z.object({}),
});

export const SupportedModelSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    displayName: z.string(),
    displayType: z.string(),
    publisher: z.string(),
    baseModel: z.string(),
    baseModelId: z.string(),
    capabilities: z.array(z.string()),
    inputModalities: z.array(z.string()),
    outputModalities: z.array(z.string()),
    products: z.array(z.string()),
    status: z.string(),
    deploymentProfiles: z.array(DeploymentProfileSchema),
    contextLength: z.string(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'SupportedModel' });

export const ModelObject = z
  .object({
    id: z.string(),
    object: z.literal('model'),
    created: z.number(),
    type: z.enum([
      'chat',
      'language',
      'code',
      'image',
      'embedding',
      'moderation',
      'rerank',
      'audio',
      'transcribe',
      'video',
    ]),
    display_name: z.string(),
    organization: z.string(),
    link: z.string().optional(),
    license: z.string().optional(),
    context_length: z.number().optional(),
    pricing: z
      .object({
        base: z.number(),
        finetune: z.number(),
        hourly: z.number(),
        input: z.number(),
        output: z.number(),
        cached_input: z.number().optional(),
      })
      .optional(),
  })
  .meta({ id: 'ModelObject' });
