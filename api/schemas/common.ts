import { z } from 'zod';

export const ErrorResponseSchema = z
  .object({
    error: z.object({
      message: z.string(),
      type: z.string(),
      param: z.string().nullable(),
      code: z.string().nullable(),
    }),
  })
  .meta({ id: 'ErrorResponse' });

/** `{object: 'list', data: [...]}` (spec: Conventions). */
export function listOf<T extends z.ZodType>(item: T) {
  return z.object({ object: z.literal('list'), data: z.array(item) });
}

export const IsoDateTime = z.iso.datetime({ offset: true });

/** The largest value of a PostgreSQL `integer` column: counts and sizes stored in one stop here (400, not a 500 from the database). */
export const INT4_MAX = 2 ** 31 - 1;

/** A name that becomes part of host names and container names: a DNS label (deployments, volumes, endpoints). */
export const DnsLabelName = z
  .string()
  .regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, 'lowercase letters, digits and dashes, at most 63');

/** `:projectId` of the project-scoped paths: the project's id or slug (route.ts checks it is the key's). */
export const ProjectParams = z.object({ projectId: z.string().min(1).max(128) });

/** An event id to page after (events are numbered by a bigint sequence). */
export const EventId = z.string().regex(/^\d{1,18}$/, 'an event id');
