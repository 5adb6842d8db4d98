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

/**
 * The page of a list that the official SDKs read whole (files, deployments, a project's volumes:
 * their list calls send no `limit`, and their types have no cursor). Unasked, one page holds up to
 * WHOLE_LIST_PAGE_MAX rows, more than a project keeps in practice, so those calls still see
 * everything; but never more, so that no project's list costs the API without bound. `next_cursor`
 * names the next page when more remain; a `limit` above the maximum is a 400 naming it.
 */
export const WHOLE_LIST_PAGE_MAX = 1000;
export const WholeListPageQuery = z.object({
  after: z.string().max(200).optional(),
  limit: z.coerce.number().int().min(1).max(WHOLE_LIST_PAGE_MAX).default(WHOLE_LIST_PAGE_MAX),
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
