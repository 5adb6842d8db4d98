import { z } from 'zod';

/** GET /whoami: shape of the official SDK's WhoamiResponse, plus roles. */
export const WhoamiSchema = z
  .object({
    api_key_id: z.string(),
    organization_id: z.string(),
    organization_name: z.string(),
    project_id: z.string(),
    project_name: z.string(),
    project_slug: z.string(),
    user_id: z.string().optional(),
    project_role: z.enum(['Admin', 'Editor']).nullable(),
    organization_role: z.enum(['Admin', 'Developer']).nullable(),
  })
  .meta({ id: 'Whoami' });

/** GET /v3/whoami: the official SDK's WhoamiProjectAPIKey, the only kind of credential Gantry issues. */
export const WhoamiV3Schema = z
  .object({
    type: z.literal('project_api_key'),
    api_key: z.object({ id: z.string() }),
    organization: z.object({ id: z.string(), name: z.string() }),
    project: z.object({ id: z.string(), name: z.string(), slug: z.string() }),
  })
  .meta({ id: 'WhoamiTyped' });

const LineItem = z.object({
  product_name: z.string(),
  quantity: z.string(),
  unit_price: z.string(),
  cost: z.string(),
  pricing_dimensions: z.record(z.string(), z.string()),
  attributes: z.record(z.string(), z.string()),
});
const Window = z.object({
  date: z.string(),
  start_time: z.string(),
  end_time: z.string(),
  line_items: z.array(LineItem),
});
/** GET /billing/usage: the organization's usage report, by day or hour. */
export const UsageReportSchema = z
  .object({
    object: z.literal('list'),
    organization_id: z.string(),
    billing_period: z.string(),
    currency: z.literal('USD'),
    data: z.array(Window),
    earliest_window_start: z.string().nullable(),
    latest_window_end: z.string().nullable(),
    next_cursor: z.string().nullable(),
  })
  .meta({ id: 'BillingUsageReport' });

export const UsageReportQuery = z.object({
  month: z
    .string()
    .regex(/^\d{4}-(0[1-9]|1[0-2])$/, 'a month as YYYY-MM')
    .optional(),
  // The Python SDK says `day` and `hour`.
  granularity: z
    .enum(['daily', 'hourly', 'day', 'hour'])
    .default('daily')
    .transform((g) => (g === 'day' ? 'daily' : g === 'hour' ? 'hourly' : g)),
  limit: z.coerce.number().int().min(1).max(1000).default(31),
  /** The start_time of the last window of the previous page (`after`, as the Python SDK pages; `cursor` too). */
  after: z.string().max(64).optional(),
  cursor: z.string().max(64).optional(),
  /** The caller's own organization (the Python SDK may name it); reports are per organization. */
  organization_id: z.string().max(128).optional(),
});

/** PATCH /admin/organizations/:organizationId: the beta features operators switch per organization. */
export const UpdateOrganizationFeaturesBody = z.object({ billing_usage_enabled: z.boolean() });
export const OrganizationFeaturesSchema = z.object({ organization_id: z.string(), billing_usage_enabled: z.boolean() });
