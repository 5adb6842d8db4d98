import { z } from 'zod';
import { GPU_TYPES } from '../../shared/gpu-types';
import { IsoDateTime } from './common';

const HostReportSchema = z.object({
  hostname: z.string(),
  pid: z.number().int(),
  task_queue: z.string(),
  accelerator: z.enum(['nvidia', 'simulated', 'none']).optional(),
  gpu_type: z.enum(GPU_TYPES).optional(),
  gpus: z
    .array(z.object({ index: z.number(), name: z.string(), memory_total_mib: z.number(), driver_version: z.string() }))
    .optional(),
  note: z.string().optional(),
});

export const SelfCheckSchema = z
  .object({
    id: z.string(),
    object: z.literal('system.self_check'),
    status: z.enum(['running', 'passed', 'failed']),
    workflow_id: z.string(),
    created_at: IsoDateTime,
    completed_at: IsoDateTime.nullable(),
    probes: z.array(
      z.object({
        task_queue: z.string(),
        status: z.enum(['pending', 'ok', 'no_worker', 'failed']),
        host: HostReportSchema.nullable(),
        detail: z.string().nullable(),
        latency_ms: z.number().int().nullable(),
        updated_at: IsoDateTime,
      }),
    ),
  })
  .meta({ id: 'SelfCheck' });

export const CreateSelfCheckBody = z
  .object({
    gpu_types: z
      .array(z.enum(GPU_TYPES))
      .max(GPU_TYPES.length)
      .optional()
      .describe('GPU types whose gpu.<type> queues to probe; default: every GPU queue that has a live worker'),
  })
  .meta({ id: 'CreateSelfCheckRequest' });

export const ListSelfChecksQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
});

const TaskQueueStatusSchema = z.object({
  name: z.string(),
  workflow_pollers: z.number().int(),
  activity_pollers: z.number().int(),
  pollers: z.array(
    z.object({
      identity: z.string(),
      kind: z.enum(['workflow', 'activity']),
      last_access_time: IsoDateTime.nullable(),
    }),
  ),
});

export const SystemStatusSchema = z
  .object({
    status: z.enum(['ok', 'degraded']),
    database: z.object({
      ok: z.boolean(),
      latency_ms: z.number().nullable(),
      migrations: z.array(z.string()),
      error: z.string().optional(),
    }),
    temporal: z.object({
      ok: z.boolean(),
      address: z.string(),
      namespace: z.string(),
      error: z.string().optional(),
    }),
    task_queues: z.array(TaskQueueStatusSchema),
  })
  .meta({ id: 'SystemStatus' });
