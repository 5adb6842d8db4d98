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
