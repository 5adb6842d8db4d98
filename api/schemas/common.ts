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
