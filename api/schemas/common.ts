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
