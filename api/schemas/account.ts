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
