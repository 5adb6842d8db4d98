/**
 * Cursor pages in the official SDK's CursorPagination shape: `limit` and
 * `after` in, `data` and `next_cursor` out. A cursor is opaque to clients: the
 * exact creation time (microseconds) and id of the last item of the page.
 */
import { z } from 'zod';
import { badRequest } from './errors';

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

/** A list response from `limit + 1` rows: the first `limit`, mapped, and a cursor when more remain. */
export async function cursorPage<R, T>(
  rows: R[],
  limit: number,
  cursorOf: (last: R) => string,
  map: (row: R) => T | Promise<T>,
): Promise<{ object: 'list'; data: T[]; next_cursor: string | null }> {
  const page = rows.slice(0, limit);
  return {
    object: 'list',
    data: await Promise.all(page.map(map)),
    next_cursor: rows.length > limit ? cursorOf(page[page.length - 1]) : null,
  };
}
