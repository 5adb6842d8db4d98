/**
 * Cursor pages in the official SDK's CursorPagination shape: `limit` and
 * `after` in, `data` and `next_cursor` out. A cursor is opaque to clients: the
 * exact creation time (microseconds) and id of the last item of the page.
 */
import { z } from 'zod';
import { badRequest } from '../errors';

export const PageQuery = z.object({
  after: z.string().max(200).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});

export function encodeCursor(last: { created_us: string; id: string }): string {
  return Buffer.from(`${last.created_us}|${last.id}`, 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string | undefined): { createdUs: string; id: string } | undefined {
  if (!cursor) return undefined;
  const [createdUs, id] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  if (!/^\d{1,20}$/.test(createdUs ?? '') || !id) throw badRequest('after is not a cursor this API issued.', 'after');
  return { createdUs, id };
}
