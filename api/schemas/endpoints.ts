/**
 * Dedicated endpoints (spec: Dedicated inference endpoints; the SDK's v2 endpoints, deployments,
 * adapters, rollouts and deployment profiles): what the API takes and what it answers. Field
 * names are the SDK's (camelCase, enum strings); a field that only appears in some states is
 * optional.
 */
import { z } from 'zod';
import { PageQuery } from '../cursor-pages';
import { FILTER_FORM, ORDER_BY_FORM } from '../list-filter';
import {
  cursorPageOf,
  DnsLabelName,
  EventId,
  IsoDateTime,
  ProjectParams,
  QueryFlag,
  ResourceId,
  TIMESTAMP_FORM,
} from './common';

// ---- requests ----

const Name = DnsLabelName;
const Visibility = z.enum(['VISIBILITY_PRIVATE', 'VISIBILITY_INTERNAL']);
/** The SDK's DeploymentAutoscaling; what an update leaves out keeps its value. */
export const Autoscaling = z
  .object({
    minReplicas: z.number().int().min(0).max(100).optional(),
    maxReplicas: z.number().int().min(0).max(100).optional(),
    scaleDownWindow: z.string().max(32).optional(),
    scaleToZeroWindow: z.string().max(32).optional(),
    scaleUpWindow: z.string().max(32).optional(),
    scalingMetrics: z
      .array(
        z.strictObject({
          name: z.string(),
          target: z.number().positive(),
          type: z.string(),
          percentile: z.string().optional(),
        }),
      )
      .optional(),
  })
  .strict();

export const EndpointParams = ProjectParams.extend({ id: ResourceId });
export const EndpointOnlyParams = ProjectParams.extend({ endpointId: ResourceId });
export const DeploymentParams = ProjectParams.extend({ endpointId: ResourceId, id: ResourceId });

export const FilteredPageQuery = PageQuery.extend({
  filter: z.string().max(200).meta({ pattern: FILTER_FORM }).optional(),
  orderBy: z.string().max(100).meta({ pattern: ORDER_BY_FORM }).optional(),
});
export const UpdateMaskQuery = z.object({ updateMask: z.string().optional() });
export const EtagQuery = z.object({ etag: z.string().optional() });
/** The SDK sends validateOnly in the query string; a body field is accepted too. */
export const ValidateOnlyQuery = z.object({ validateOnly: QueryFlag.optional() });

export const CreateEndpointBody = z.object({ name: Name, visibility: Visibility.optional() });
export const UpdateEndpointBody = z.object({
  etag: z.string().optional(),
  name: Name.optional(),
  visibility: Visibility.optional(),
  trafficSplit: z.array(z.strictObject({ deploymentId: z.string(), weight: z.number().min(0).max(100) })).optional(),
});

export const CreateEndpointDeploymentBody = z
  .object({
    name: Name,
    autoscaling: Autoscaling,
    model: z.string().optional(),
    modelId: z.string().optional(),
    modelRevisionId: z.string().optional(),
    enableLora: z.boolean().optional(),
    validateOnly: z.boolean().optional(),
    config: z.string().optional(),
    configId: z.string().optional(),
    placement: z.unknown().optional(),
  })
  .meta({
    // planEndpointDeployment (api/use-cases/endpoints.ts) deploys modelId, or the model its resource name names.
    anyOf: [
      { required: ['modelId'], properties: { modelId: { minLength: 1 } } },
      { required: ['model'], properties: { model: { pattern: '^projects/[^/]+/models/[^/]+(/revisions/[^/]+)?$' } } },
    ],
  });
export const UpdateEndpointDeploymentBody = z.object({
  etag: z.string().optional(),
  name: Name.optional(),
  autoscaling: Autoscaling.optional(),
});

export const EVENT_LEVELS = ['LEVEL_DEBUG', 'LEVEL_INFO', 'LEVEL_WARN', 'LEVEL_ERROR'] as const;
const Timestamp = z
  .string()
  .refine((s) => !Number.isNaN(Date.parse(s)), 'an RFC 3339 timestamp')
  .meta({ pattern: TIMESTAMP_FORM });
/** The SDK sends arrays comma-separated (`types=a,b`); repeated keys arrive as arrays. */
const StringList = z.union([z.string(), z.array(z.string())]);
export const ListEndpointEventsQuery = z.object({
  after: EventId.optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
  deploymentIds: StringList.optional(),
  types: StringList.optional(),
  minLevel: z.enum(EVENT_LEVELS).optional(),
  sourceKinds: StringList.optional(),
  since: Timestamp.optional(),
  until: Timestamp.optional(),
  subjectId: z.string().optional(),
});

export const AdapterDeploymentParams = z.object({
  projectId: ResourceId,
  endpointId: ResourceId,
  deploymentId: ResourceId,
});
export const AdapterParams = AdapterDeploymentParams.extend({ id: ResourceId });
export const AttachEndpointAdapterBody = z.object({
  adapterModelId: z.string().min(1),
  adapterRevisionId: z.string().optional(),
  force: z.boolean().optional(),
});
export const ListEndpointAdaptersQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  after: z.string().max(200).optional(),
});
export const UpdateEndpointAdapterBody = z.object({ adapterRevisionId: z.string().min(1), etag: z.string().min(1) });
export const DetachEndpointAdapterQuery = z.object({ etag: z.string().min(1) });

export const ListShadowExperimentsQuery = PageQuery.extend({ includeTargets: QueryFlag.optional() });

export const ListModelConfigsQuery = PageQuery.extend({
  // The form the route reads the model id from (api/routes/model-configs.ts).
  referenceModel: z.string().max(300).meta({ pattern: '^projects/[^/]+/models/.+$' }).optional(),
  referenceModelId: z.string().max(200).optional(),
});
export const ModelConfigParams = ProjectParams.extend({ id: ResourceId });
/** Operators: a deployment profile for a model family, public or for one project. */
export const CreateModelConfigBody = z.object({
  referenceModelId: z.string().min(1).max(200),
  projectId: ResourceId.optional(),
  selectors: z
    .array(z.strictObject({ key: z.string().max(64), value: z.string().max(200) }))
    .min(1)
    .max(20),
});

// ---- rollout requests ----

const Duration = z.string().max(32);
const Metric = z.strictObject({
  name: z.enum(['inflight_requests', 'router_error_rate', 'router_latency']),
  percentile: z.number().optional(),
  stat: z
    .enum(['METRIC_STAT_TYPE_AVG', 'METRIC_STAT_TYPE_MIN', 'METRIC_STAT_TYPE_MAX', 'METRIC_STAT_TYPE_PERCENTILE'])
    .optional(),
  thresholdCheck: z
    .strictObject({
      operator: z.enum([
        'THRESHOLD_OPERATOR_GT',
        'THRESHOLD_OPERATOR_GTE',
        'THRESHOLD_OPERATOR_LT',
        'THRESHOLD_OPERATOR_LTE',
      ]),
      // Left out by the Python CLI when no threshold is given; the SDK reads a missing value as 0.
      value: z.number().default(0),
    })
    .optional(),
  regressionCheck: z
    .strictObject({
      direction: z.enum(['REGRESSION_DIRECTION_HIGHER_IS_WORSE', 'REGRESSION_DIRECTION_LOWER_IS_WORSE']),
      maxRegressionPercent: z.number().default(0),
    })
    .optional(),
  window: Duration.optional(),
});
/** A rollout: a source and target deployment, a strategy (canary steps, rolling or blue-green), metric gates. */
export const CreateRolloutBody = z.object({
  sourceDeploymentId: ResourceId,
  targetDeploymentId: ResourceId,
  canary: z
    .strictObject({
      stepInterval: Duration.optional(),
      steps: z
        .array(z.strictObject({ traffic: z.number(), replicas: z.number().int().min(0).max(100).optional() }))
        .max(20)
        .optional(),
    })
    .optional(),
  rolling: z.strictObject({}).optional(),
  blueGreen: z.strictObject({}).optional(),
  metrics: z.array(Metric).max(10).optional(),
  finalSourceReplicas: z.number().int().min(0).max(100).optional(),
  finalTargetReplicas: z.number().int().min(1).max(100).optional(),
});
export type CreateRolloutRequest = z.infer<typeof CreateRolloutBody>;

export const RolloutParams = EndpointOnlyParams.extend({ id: ResourceId });
export const EtagBody = z.object({ etag: z.string().optional() });
export const PauseRolloutBody = EtagBody.extend({ reason: z.string().max(1000).optional() });
export const CancelRolloutBody = EtagBody.extend({
  reason: z.string().min(1).max(1000),
  disposition: z.enum(['CANCEL_DISPOSITION_FREEZE', 'CANCEL_DISPOSITION_REVERT']).optional(),
});
export const ListRolloutsQuery = PageQuery.extend({
  filter: z.enum(['ROLLOUT_FILTER_ACTIVE', 'ROLLOUT_FILTER_TERMINAL']).optional(),
});

// ---- responses ----

export const DeploymentStateName = z.enum([
  'DEPLOYMENT_STATE_PROVISIONING',
  'DEPLOYMENT_STATE_READY',
  'DEPLOYMENT_STATE_SCALING',
  'DEPLOYMENT_STATE_DEGRADED',
  'DEPLOYMENT_STATE_FAILED',
  'DEPLOYMENT_STATE_STOPPED',
  'DEPLOYMENT_STATE_STOPPING',
]);

/** Autoscaling as the deployment was given it (minReplicas, maxReplicas, windows, scalingMetrics). */
const AutoscalingAsGiven = z.record(z.string(), z.unknown()).meta({ description: 'Autoscaling as given' });

export const EndpointDeploymentSchema = z
  .object({
    id: z.string(),
    endpointId: z.string(),
    projectId: z.string(),
    name: z.string(),
    model: z.string(),
    modelId: z.string(),
    modelRevisionId: z.string(),
    config: z.string(),
    configId: z.string(),
    hardware: z.string(),
    autoscaling: AutoscalingAsGiven,
    enableLora: z.boolean(),
    status: z.object({
      state: DeploymentStateName,
      message: z.string(),
      readyReplicas: z.number().int(),
      scheduledReplicas: z.number().int(),
    }),
    desiredReplicas: z.number().int(),
    trafficMode: z.literal('TRAFFIC_MODE_LIVE'),
    estimatedEffectiveTrafficShare: z.number(),
    etag: z.string(),
    createdAt: IsoDateTime,
    updatedAt: IsoDateTime,
  })
  .meta({ id: 'EndpointDeployment' });
export const EndpointDeploymentListSchema = cursorPageOf(EndpointDeploymentSchema);

export const EndpointSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    projectId: z.string(),
    endpointType: z.literal('ENDPOINT_TYPE_DEDICATED'),
    visibility: z.enum(['VISIBILITY_PRIVATE', 'VISIBILITY_INTERNAL']),
    etag: z.string(),
    trafficSplit: z.array(z.object({ deploymentId: z.string(), weight: z.number() })),
    activeRolloutId: z.string().optional(),
    deployments: z.array(
      z.object({
        id: z.string(),
        name: z.string(),
        model: z.string(),
        modelId: z.string(),
        autoscaling: AutoscalingAsGiven,
        state: DeploymentStateName,
        readyReplicas: z.number().int(),
        desiredReplicas: z.number().int(),
        hardware: z.string(),
        trafficMode: z.literal('TRAFFIC_MODE_LIVE'),
        estimatedEffectiveTrafficShare: z.number(),
        createdAt: IsoDateTime,
      }),
    ),
    createdAt: IsoDateTime,
    updatedAt: IsoDateTime,
  })
  .meta({ id: 'Endpoint' });
export const EndpointListSchema = cursorPageOf(EndpointSchema);

export const EndpointEventSchema = z
  .object({
    id: z.string(),
    createdAt: IsoDateTime,
    endpointId: z.string(),
    level: z.string(),
    source: z.string(),
    sourceKind: z.string(),
    type: z.string(),
    message: z.string(),
    deploymentId: z.string().optional(),
    oldReplicas: z.number().int().optional(),
    newReplicas: z.number().int().optional(),
    status: z.string().optional(),
    subjectId: z.string().optional(),
  })
  .meta({ id: 'EndpointEvent' });
export const EndpointEventListSchema = cursorPageOf(EndpointEventSchema);

const AdapterLoadState = z.enum([
  'ADAPTER_LOAD_STATE_PENDING',
  'ADAPTER_LOAD_STATE_LOADING',
  'ADAPTER_LOAD_STATE_READY',
  'ADAPTER_LOAD_STATE_REMOVING',
  'ADAPTER_LOAD_STATE_FAILED',
]);

export const EndpointAdapterSchema = z
  .object({
    id: z.string(),
    adapterModelId: z.string(),
    adapterModel: z.string(),
    desiredRevisionId: z.string(),
    desiredRevision: z.string(),
    etag: z.string(),
    adapterValid: z.boolean(),
    adapterValidReason: z.string().optional(),
    perCluster: z.array(
      z.object({
        clusterId: z.string(),
        adapterModelId: z.string(),
        adapterModel: z.string(),
        state: AdapterLoadState,
        readyPodCount: z.number().int(),
        failedPodCount: z.number().int(),
        totalPodCount: z.number().int(),
        adapterValid: z.boolean(),
        adapterValidReason: z.string().optional(),
        realizedRevisionId: z.string().optional(),
        realizedRevision: z.string().optional(),
        realizedEtag: z.string().optional(),
        reason: z.string().optional(),
        message: z.string().optional(),
        loadedAt: IsoDateTime.optional(),
        updatedAt: IsoDateTime,
      }),
    ),
  })
  .meta({ id: 'EndpointAdapter' });
export const EndpointAdapterListSchema = cursorPageOf(EndpointAdapterSchema);

const MetricResult = z.object({
  name: z.string(),
  stat: z.string(),
  percentile: z.number().optional(),
  check: z.string(),
  operator: z.string().optional(),
  threshold: z.number().optional(),
  direction: z.string().optional(),
  maxRegressionPercent: z.number().optional(),
  sourceValue: z.number().optional(),
  targetValue: z.number().optional(),
  verdict: z.string(),
});

export const RolloutState = z.enum([
  'ROLLOUT_STATE_PENDING',
  'ROLLOUT_STATE_RUNNING',
  'ROLLOUT_STATE_PAUSING',
  'ROLLOUT_STATE_PAUSED',
  'ROLLOUT_STATE_SYSTEM_PAUSED',
  'ROLLOUT_STATE_STABILIZING',
  'ROLLOUT_STATE_CANCELLING',
  'ROLLOUT_STATE_CANCELED',
  'ROLLOUT_STATE_COMPLETED',
  'ROLLOUT_STATE_ABORTING',
  'ROLLOUT_STATE_ABORTED',
]);

export const RolloutSchema = z
  .object({
    id: z.string(),
    createdAt: IsoDateTime,
    endpointId: z.string(),
    sourceDeploymentId: z.string(),
    targetDeploymentId: z.string(),
    strategy: z.string(),
    state: RolloutState,
    status: z.object({
      steps: z.array(
        z.object({
          stepIndex: z.number().int(),
          targetTrafficPercent: z.number(),
          state: z.string(),
          startedAt: z.string().optional(),
          completedAt: z.string().optional(),
          failureReason: z.string().optional(),
          metrics: z.array(MetricResult).optional(),
        }),
      ),
      totalSteps: z.number().int(),
      condition: z
        .object({
          atStep: z.number().int().optional(),
          category: z.string().optional(),
          message: z.string(),
          metrics: z.array(MetricResult).optional(),
          observedAt: z.string(),
        })
        .optional(),
      updatedAt: z.string().optional(),
    }),
    currentStep: z.number().int().optional(),
    currentTrafficPercent: z.number().optional(),
    pauseInfo: z.object({ pausedAt: z.string(), reason: z.string().optional() }).optional(),
    startedAt: IsoDateTime.optional(),
    completedAt: IsoDateTime.optional(),
    etag: z.string(),
  })
  .meta({ id: 'Rollout' });
export const RolloutListSchema = cursorPageOf(RolloutSchema);

const PlannedStep = z.object({ traffic: z.number(), replicas: z.number().int().optional() });

export const RolloutPreviewSchema = z
  .object({
    sourceReplicas: z.number().int(),
    targetReplicas: z.number().int(),
    targetMinReplicas: z.number().int(),
    targetMaxReplicas: z.number().int(),
    warnings: z.array(z.object({ code: z.string(), message: z.string() })),
    spec: z.object({
      sourceDeploymentId: z.string(),
      targetDeploymentId: z.string(),
      canary: z.object({ stepInterval: z.string(), steps: z.array(PlannedStep) }).optional(),
      rolling: z.object({}).optional(),
      blueGreen: z.object({}).optional(),
      metrics: z.array(
        z.object({
          name: z.string(),
          stat: z.string(),
          percentile: z.number().optional(),
          thresholdCheck: z.object({ operator: z.string(), value: z.number() }).optional(),
          regressionCheck: z.object({ direction: z.string(), maxRegressionPercent: z.number() }).optional(),
          window: z.string(),
        }),
      ),
      finalSourceReplicas: z.number().int(),
      finalTargetReplicas: z.number().int(),
    }),
    estimatedEffectiveSteps: z.array(PlannedStep),
    frozenPair: z.boolean(),
  })
  .meta({ id: 'RolloutPreview' });

export const ModelConfigSchema = z
  .object({
    id: z.string(),
    projectId: z.string(),
    referenceModel: z.string(),
    referenceModelId: z.string(),
    selectors: z.array(z.object({ key: z.string(), value: z.string() })),
    certifications: z
      .array(z.string())
      .max(0)
      .meta({ description: 'None: no certification runs on this installation' }),
  })
  .meta({ id: 'ModelConfig' });
export const ModelConfigListSchema = cursorPageOf(ModelConfigSchema);

export const FaultInjection = z.object({
  abortPercent: z.number().min(0).max(100),
  httpStatus: z.number().int().min(500).max(599).default(503),
});
export const FaultInjectionResult = z.object({ deploymentId: z.string(), faultInjection: FaultInjection.nullable() });

/** No experiment runs on this installation: the list is always empty (an item would name its experiment). */
export const EmptyExperimentList = z.object({
  object: z.literal('list'),
  data: z.array(z.object({ id: z.string(), name: z.string() })).max(0),
  next_cursor: z.null(),
});

// ---- analytics (the SDK's beta.endpoints.analytics) ----

export const EndpointAnalyticsQuery = z.object({
  deploymentId: ResourceId.optional(),
  startTime: IsoDateTime.optional(),
  endTime: IsoDateTime.optional(),
  granularity: z
    .string()
    .regex(/^[1-9]\d{0,3}[mhd]$/, 'a duration such as 1m, 1h or 1d')
    .default('1d'),
  includeTimeSeries: QueryFlag.optional(),
});
const AnalyticsTimeRange = z.object({ startTime: IsoDateTime, endTime: IsoDateTime });
const AnalyticsMetrics = z.object({
  endpointId: z.string(),
  deploymentId: z.string().optional(),
  requestMetrics: z.object({
    totalRequests: z.string(),
    successfulRequests: z.string(),
    failedRequests: z.string(),
    requestsPerSecond: z.number(),
  }),
  errorMetrics: z.object({ errorRate: z.number().describe('Percentage in [0, 100]') }),
  latencyMetrics: z.object({
    latencyP50Ms: z.number().optional(),
    latencyP90Ms: z.number().optional(),
    latencyP99Ms: z.number().optional(),
  }),
  throughputMetrics: z.object({ requestsPerSecond: z.number() }),
  tokenMetrics: z
    .object({
      totalInputTokens: z.string(),
      totalOutputTokens: z.string(),
      avgInputTokens: z.number().optional(),
      avgOutputTokens: z.number().optional(),
    })
    .optional()
    .describe("The endpoint's tokens (the gateway counts them per endpoint, not per deployment)"),
});
const AnalyticsTimeSeries = z.array(z.object({ timestamp: IsoDateTime, values: z.record(z.string(), z.number()) }));
export const EndpointAnalyticsSchema = z
  .object({
    endpointId: z.string(),
    timeRange: AnalyticsTimeRange,
    metrics: AnalyticsMetrics,
    timeSeries: AnalyticsTimeSeries.optional(),
    deploymentAnalytics: z.array(
      z.object({
        deploymentId: z.string(),
        endpointId: z.string(),
        timeRange: AnalyticsTimeRange,
        metrics: AnalyticsMetrics,
        timeSeries: AnalyticsTimeSeries.optional(),
      }),
    ),
  })
  .meta({ id: 'EndpointAnalytics' });
