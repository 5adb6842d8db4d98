/** The model registry (spec: Models; the SDK's v2 models, revisions and uploads): what the API takes and answers. */
import { z } from 'zod';
import { PageQuery } from '../cursor-pages';
import { cursorPageOf, EventId, listOf, ProjectParams, ResourceId } from './common';

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

export const CreateModelUploadBody = z.object({
  modelId: z.string().min(1).max(300),
  remoteUrl: z.string().min(1).max(4096),
  token: z.string().min(1).max(8192).optional(),
});

export const ModelUploadPageSchema = cursorPageOf(UploadSchema);

export const ListModelUploadEventsQuery = z.object({
  after: EventId.optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});

export const ModelUploadEventPageSchema = cursorPageOf(
  z.object({ id: z.string(), createdAt: z.string(), level: z.string(), type: z.string(), message: z.string() }),
);

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

export const CreateModelBody = z.object({
  baseModelId: z.string().min(1),
  name: z.string().min(1).max(300),
  /** What the weights are: `model` or `adapter` (the plurals are taken too). */
  type: z.enum(['model', 'models', 'adapter', 'adapters']),
  description: z.string().max(2000).optional(),
});

export type CreateModelInput = z.output<typeof CreateModelBody>;

export const ListModelsQuery = PageQuery.extend({
  organizationId: z.string().optional(),
  visibility: Visibility.optional(),
});

export const ModelPageSchema = cursorPageOf(ModelSchema);

export const UpdateModelQuery = z.object({ updateMask: z.string().optional() });

export const UpdateModelBody = z.object({
  name: z.string().min(1).max(300).optional(),
  description: z.string().max(2000).optional(),
  visibility: Visibility.optional(),
});

export const ModelRevisionPageSchema = cursorPageOf(
  z.object({ revisionId: z.string(), createdAt: z.string(), validationStatus: z.string() }).catchall(z.unknown()),
);

export const ListModelFilesQuery = z.object({ revisionId: z.string().optional() });

/** The files of one revision, with the revision and their total size. */
export const ModelFilePageSchema = listOf(
  z.object({ path: z.string(), sizeBytes: z.string(), hash: z.string() }),
).extend({
  revisionId: z.string().optional(),
  revisionCreatedAt: z.string().optional(),
  totalSizeBytes: z.string(),
  next_cursor: z.string().nullable(),
});

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

export const ListSupportedModelsQuery = z.object({
  after: z.string().optional(),
  limit: z.coerce.number().int().min(1).max(100).default(100),
  modality: z.enum(['MODALITY_TEXT', 'MODALITY_IMAGE', 'MODALITY_AUDIO', 'MODALITY_VIDEO']).optional(),
  product: z.enum(['PRODUCT_SERVERLESS', 'PRODUCT_DEDICATED', 'PRODUCT_FINE_TUNING']).optional(),
  search: z.string().max(200).optional(),
});

export const SupportedModelPageSchema = cursorPageOf(SupportedModelSchema);

/** `:id` of a supported model: its name (`org/name`, longer than a generated id). */
export const SupportedModelParams = z.object({ id: z.string().min(1).max(300) });

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

/** `?dedicated=true|false` of `GET /v1/models`, as a boolean. */
export const ListModelObjectsQuery = z.object({
  dedicated: z.preprocess((v) => (v === 'true' ? true : v === 'false' ? false : v), z.boolean()).optional(),
});

/** `GET /v1/models` answers a bare array (the OpenAI-style catalog), not a list object. */
export const ModelObjectListSchema = z.array(ModelObject);

/** A catalog id: `org/name`, or a bare name. */
export const ModelObjectParams = z.object({ org: z.string().max(200).optional(), name: z.string().max(200) });

/**
 * Local weight files into a registered model, and a revision's files out of it, in the official
 * Python CLI's protocol (`tg models upload`, `tg models download`; api/routes/model-file-transfers.ts).
 */
const RevisionFilePath = z.string().min(1).max(1024);
/** An S3-style ETag: the MD5 of the bytes, or for a file of several parts the MD5 of the parts' MD5s and `-<parts>`. */
const Md5Etag = z
  .string()
  .regex(
    /^"?[0-9a-fA-F]{32}(-[0-9]+)?"?$/,
    'an MD5 ETag: 32 hex digits, and -<parts> for a file sent in several parts',
  );
const SignedPart = z.object({
  partNumber: z.number().int(),
  url: z.string(),
  headers: z.record(z.string(), z.string()),
});

export const CreateModelFileUploadBody = z.object({
  objectId: z.string().min(1).max(300),
  files: z
    .array(z.object({ path: RevisionFilePath, hash: Md5Etag, numParts: z.number().int().min(1).max(10_000) }))
    .min(1)
    .max(10_000),
});

export const ModelFileUploadPlanSchema = z
  .object({
    objectId: z.string(),
    uploadId: z.string(),
    revisionId: z.string(),
    expiresAt: z.string(),
    files: z.array(
      z.object({ path: z.string(), uploadId: z.string(), skipUpload: z.boolean(), parts: z.array(SignedPart) }),
    ),
  })
  .meta({ id: 'ModelFileUploadPlan' });

export const CompleteModelFileUploadBody = z.object({
  objectId: z.string().min(1).max(300),
  files: z
    .array(
      z.object({
        path: RevisionFilePath,
        hash: Md5Etag,
        skipUpload: z.boolean().optional(),
        uploadDetails: z
          .object({
            uploadId: z.string().min(1).max(64),
            parts: z.array(z.object({ partNumber: z.number().int().min(1).max(10_000), hash: Md5Etag })).max(10_000),
          })
          .optional(),
      }),
    )
    .min(1)
    .max(10_000),
});

export const ModelFileUploadCompletedSchema = z
  .object({ objectId: z.string(), revisionId: z.string(), files: z.number().int(), bytes: z.number().int() })
  .meta({ id: 'ModelFileUploadCompleted' });

export const ModelDownloadBody = z.object({
  objectId: z.string().min(1).max(300),
  /** Only these files of the revision; all of them when empty. */
  paths: z.array(RevisionFilePath).max(10_000).optional(),
  /** The newest revision when absent. */
  revisionId: z.string().min(1).max(64).optional(),
});

export const ModelDownloadPlanSchema = z
  .object({
    objectId: z.string(),
    revisionId: z.string(),
    expiresAt: z.string(),
    files: z.array(
      z.object({
        path: z.string(),
        hash: z.string(),
        sizeBytes: z.number().int(),
        parts: z.array(SignedPart.extend({ sizeBytes: z.number().int() })),
      }),
    ),
  })
  .meta({ id: 'ModelDownloadPlan' });

export const ModelUploadPartParams = z.object({
  id: z.string().min(1).max(64),
  file: z.coerce.number().int().min(0).max(10_000),
  part: z.coerce.number().int().min(1).max(10_000),
});
export const RevisionFileParams = z.object({
  id: z.string().min(1).max(64),
  file: z.coerce.number().int().min(0).max(100_000),
});
