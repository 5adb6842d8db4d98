/** Container deployments and their volumes (spec: Container deployments; the SDK's beta.jig): what the API takes and answers. */
import { z } from 'zod';
import { REPLICA_PATH, REVISION_ENV } from '../../shared/deployments';
import { parseImageReference } from '../../shared/image-references';
import { cursorPageOf, DnsLabelName, INT4_MAX, IsoDateTime, QueryFlag, ResourceId, listOf } from './common';

const Name = DnsLabelName;
const EnvVar = z
  .object({
    name: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/),
    value: z.string().optional(),
    value_from_secret: z.string().optional(),
  })
  .refine((e) => (e.value === undefined) !== (e.value_from_secret === undefined), {
    message: 'set exactly one of value and value_from_secret',
  });
// The SDK's shapes. HTTP metrics (requests, and how long they take to answer) are measured at the gateway's proxy.
const AutoscalingByMetric = z.discriminatedUnion('metric', [
  z.object({
    metric: z.literal('CustomMetric'),
    custom_metric_name: z.string().regex(/^[a-zA-Z_:][a-zA-Z0-9_:]*$/, 'a Prometheus metric name'),
    target: z.number().positive(),
    time_interval_minutes: z.number().int().min(0).max(60).optional(),
  }),
  z.object({
    metric: z.literal('QueueBacklogPerWorker'),
    model: z.string().optional(),
    target: z.number().positive(),
    time_interval_minutes: z.number().int().min(0).max(60).optional(),
  }),
  z.object({
    metric: z.literal('HTTPTotalRequests'),
    target: z.number().positive(),
    time_interval_minutes: z.number().int().min(1).max(60).optional(),
  }),
  z.object({
    metric: z.literal('HTTPAvgRequestDuration'),
    // Milliseconds of mean answer time per request, measured at the gateway (the SDK's default 500).
    target: z.number().positive().default(500),
    time_interval_minutes: z.number().int().min(1).max(60).optional(),
  }),
]);
/**
 * As the SDKs give it: `{}` turns autoscaling off (the Python CLI sends it by default); a
 * configuration without `metric` is the HTTP one, HTTPTotalRequests (the SDK's HTTPAutoscalingConfig).
 */
const Autoscaling = z.preprocess(
  (a) =>
    a && typeof a === 'object' && !Array.isArray(a) && !('metric' in a) && Object.keys(a).length
      ? { metric: 'HTTPTotalRequests', ...a }
      : a,
  z.union([z.strictObject({}).describe('{}: no autoscaling'), AutoscalingByMetric]),
);
const SpecFields = {
  description: z.string().max(1000).optional(),
  // An OCI image reference and nothing else: Podman is handed it (a string such as `--privileged` is an option there).
  image: z
    .string()
    .min(1)
    .max(512)
    .refine((i) => parseImageReference(i) !== undefined, 'an image reference: [registry/]repository[:tag][@digest]'),
  command: z.array(z.string()).optional(),
  args: z.array(z.string()).optional(),
  cpu: z.number().positive().optional(),
  memory: z.number().positive().optional(),
  storage: z.number().positive().optional(),
  gpu_count: z.number().int().nonnegative().optional(),
  gpu_type: z.enum(['h100-80gb', 'h100-40gb-mig', 'h200-140gb', 'b200-192gb']),
  port: z.number().int().min(1).max(65535),
  // Asked from the container host's network: a path of the replica, never another origin.
  health_check_path: z
    .string()
    .max(2048)
    .regex(REPLICA_PATH, 'a path of the replica: /, then printable ASCII without spaces or backslashes, not //')
    .optional(),
  min_replicas: z.number().int().min(0).max(100),
  max_replicas: z.number().int().min(0).max(100).optional(),
  termination_grace_period_seconds: z.number().int().min(0).max(3600),
  capacity_type: z.string().optional(),
  // The revision variable is Gantry's to set (a client that sends back what it read would pin it).
  environment_variables: z.array(EnvVar).transform((list) => list.filter((e) => e.name !== REVISION_ENV)),
  volumes: z
    .array(
      z.object({
        mount_path: z.string(),
        name: z.string(),
        version: z.number().int().min(0).max(INT4_MAX).optional().describe('0 or left out: the current version'),
      }),
    )
    .optional(),
  model_mounts: z
    .array(z.object({ model_id: z.string(), mount_path: z.string(), revision_id: z.string().optional() }))
    .optional(),
  autoscaling: Autoscaling.optional(),
};
// Defaults apply on deploy only: an update changes just what it names.
export const CreateDeploymentBody = z
  .object({
    name: Name,
    ...SpecFields,
    port: SpecFields.port.default(8000),
    min_replicas: SpecFields.min_replicas.default(1),
    termination_grace_period_seconds: SpecFields.termination_grace_period_seconds.default(30),
    environment_variables: SpecFields.environment_variables.default([]),
  })
  .meta({ id: 'DeploymentCreateRequest' });
export const UpdateDeploymentBody = z
  .object({
    name: Name.optional(),
    ...Object.fromEntries(Object.entries(SpecFields).map(([k, v]) => [k, (v as z.ZodType).optional()])),
  })
  .meta({ id: 'DeploymentUpdateRequest' });

export const DeploymentSchema = z
  .object({
    id: z.string(),
    object: z.literal('deployment'),
    name: z.string(),
    status: z.enum(['Updating', 'Scaling', 'Ready', 'Failed', 'ScaledToZero']),
    desired_replicas: z.number().int(),
    ready_replicas: z.number().int(),
    replica_events: z.record(z.string(), z.record(z.string(), z.unknown())),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .catchall(z.unknown())
  .meta({ id: 'Deployment' });
export const DeploymentListSchema = cursorPageOf(DeploymentSchema);

// ---- revisions (the SDK's beta.jig list_revisions, retrieve_revision, rollback) ----

/** A revision is named by its number (its id is the same number, as TOGETHER_DEPLOYMENT_REVISION_ID says). */
const RevisionNumber = z.string().regex(/^[1-9]\d{0,8}$/, 'a revision number');
export const DeploymentRevisionParams = z.object({ id: ResourceId, revision: RevisionNumber });
export const ListDeploymentRevisionsQuery = z.object({
  before: z.coerce.number().int().min(1).max(INT4_MAX).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(10),
});
export const RollbackDeploymentBody = z.object({ revision_identifier: RevisionNumber });
export const DeploymentRevisionEventSchema = z
  .object({
    object: z.literal('revision_event'),
    event_number: z.number().int(),
    action: z.enum(['create', 'update', 'rollback']),
    revision_id: z.string(),
    revision_number: z.number().int(),
    image: z.string(),
    activated_at: IsoDateTime,
    rolled_back_to: z.string().optional().describe('For a rollback: the revision whose spec it re-applied'),
  })
  .meta({ id: 'DeploymentRevisionEvent' });
export const DeploymentRevisionEventListSchema = listOf(DeploymentRevisionEventSchema);
/** A revision's spec, as it was when the revision was made. */
export const DeploymentRevisionSchema = z
  .object({ object: z.literal('revision'), revision_id: z.string(), created_at: IsoDateTime, image: z.string() })
  .catchall(z.unknown())
  .meta({ id: 'DeploymentRevision' });

export const DeploymentLogsQuery = z.object({
  replica_id: z.string().max(256).optional(),
  revision: z.string().optional(),
  version: z.string().optional(),
  follow: QueryFlag.optional(),
});
export const DeploymentLogsSchema = z.object({ lines: z.array(z.string()) });

/** Where this project's deployment images are pushed. */
export const ImageRepositoryBasePathSchema = z.object({ 'base-path': z.string() });

export const SecretSchema = z
  .object({
    id: z.string(),
    object: z.literal('secret'),
    name: z.string(),
    description: z.string().optional(),
    created_by: z.string(),
    last_updated_by: z.string(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'DeploymentSecret' });
export const SecretListSchema = listOf(SecretSchema);
export const SecretName = z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/);
export const SecretValue = z.string().min(1).max(65536);
export const CreateSecretBody = z.object({
  name: SecretName,
  value: SecretValue,
  description: z.string().max(1000).optional(),
  project_id: z.string().optional(),
});
export const UpdateSecretBody = z.object({
  name: SecretName.optional(),
  value: SecretValue.optional(),
  description: z.string().max(1000).optional(),
  project_id: z.string().optional(),
});

export const VolumeName = DnsLabelName;
export const Content = z.object({
  type: z.literal('files').default('files'),
  source_prefix: z.string().max(1024).default(''),
});
export const CreateDeploymentVolumeBody = z.object({ name: VolumeName, type: z.literal('readOnly'), content: Content });
export const UpdateDeploymentVolumeBody = z.object({
  name: VolumeName.optional(),
  type: z.literal('readOnly').optional(),
  content: Content.optional(),
});
/** `version`: an earlier version of the volume to describe. */
export const GetDeploymentVolumeQuery = z.object({ version: z.coerce.number().int().min(1).max(INT4_MAX).optional() });

const VolumeFileSchema = z.object({ name: z.string(), size: z.number(), last_modified: z.string() });
export const DeploymentVolumeSchema = z
  .object({
    id: z.string(),
    object: z.literal('volume'),
    name: z.string(),
    type: z.literal('readOnly'),
    content: z.object({ type: z.literal('files'), source_prefix: z.string(), files: z.array(VolumeFileSchema) }),
    current_version: z.number().int(),
    mounted_by: z.array(z.string()),
    version_history: z.record(
      z.string(),
      z.object({
        version: z.number().int(),
        content: z.object({ type: z.literal('files'), source_prefix: z.string() }),
        mounted_by: z.array(z.string()),
      }),
    ),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'DeploymentVolume' });
export const DeploymentVolumeListSchema = cursorPageOf(DeploymentVolumeSchema);
