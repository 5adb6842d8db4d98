/**
 * `filter` and `orderBy` of the v2 list routes (endpoints, an endpoint's deployments), as the
 * official SDKs describe them: terms on `name`, `created_at` and `updated_at` joined by AND.
 *
 *   name = "chat"          exact; `*` is a wildcard, at either end ("chat*", "*-v2") or inside ("chat*v2")
 *   name : "chat"          contains
 *   name != "chat"         not equal
 *   created_at >= "2026-11-01T00:00:00Z"   comparisons (=, !=, >, >=, <, <=) on RFC 3339 times
 *
 * A name may be given as `<project_slug>/<name>`. OR and NOT are refused with a 400 naming
 * `filter` rather than read as something else; `orderBy` is `created_at` or `updated_at`,
 * optionally `asc` or `desc`.
 */
import { badRequest } from './errors';
import { TIMESTAMP_FORM } from './schemas/common';

export interface Listed {
  name: string;
  created_at: Date;
  updated_at: Date;
}

type Op = '=' | '!=' | ':' | '>' | '>=' | '<' | '<=';
interface Term {
  field: 'name' | 'created_at' | 'updated_at';
  op: Op;
  value: string;
}

const TERM = /^\s*(name|created_at|updated_at)\s*(!=|>=|<=|=|:|>|<)\s*(?:"([^"]*)"|'([^']*)'|([^\s"']+))\s*$/i;

/**
 * The filters the document states, each one parseFilter reads: terms joined by ` AND `, a name
 * term's value one word starting with a digit or `_` (so that no AND, OR or NOT can be read in it),
 * a time term's value a quoted timestamp in TIMESTAMP_FORM. The API reads more (wildcards, other
 * spacing); these are the ones it promises.
 */
const FILTER_TERM_FORM = `(name ?(=|!=|:) ?"[0-9_][A-Za-z0-9_]{0,40}"|(created_at|updated_at) ?(=|!=|>|>=|<|<=) ?"${TIMESTAMP_FORM.slice(1, -1)}")`;
export const FILTER_FORM = `^${FILTER_TERM_FORM}( AND ${FILTER_TERM_FORM}){0,2}$`;
/** The orderings the document states (ordered reads any case and spacing too). */
export const ORDER_BY_FORM = '^(created_at|updated_at)( (asc|desc))?$';

export function parseFilter(filter: string | undefined): Term[] {
  if (filter === undefined || !filter.trim()) return [];
  if (/\b(OR|NOT)\b/.test(filter)) {
    throw badRequest('filter: OR and NOT are not supported here; join terms with AND.', 'filter');
  }
  return filter.split(/\bAND\b/i).map((part) => {
    const m = TERM.exec(part);
    if (!m) {
      throw badRequest(
        `filter: cannot read '${part.trim()}'; terms are name, created_at or updated_at, an operator (=, !=, :, >, >=, <, <=) and a value, joined by AND.`,
        'filter',
      );
    }
    const field = m[1]!.toLowerCase() as Term['field'];
    const op = m[2] as Op;
    const value = m[3] ?? m[4] ?? m[5] ?? '';
    if (field === 'name' && !['=', '!=', ':'].includes(op)) {
      throw badRequest(`filter: name takes =, != or :, not ${op}.`, 'filter');
    }
    if (field !== 'name' && (op === ':' || Number.isNaN(Date.parse(value)))) {
      throw badRequest(`filter: ${field} compares with an RFC 3339 time (=, !=, >, >=, <, <=).`, 'filter');
    }
    return { field, op, value };
  });
}

function nameMatches(name: string, op: Op, wanted: string, projectSlug: string): boolean {
  const bare = wanted.startsWith(`${projectSlug}/`) ? wanted.slice(projectSlug.length + 1) : wanted;
  if (op === ':') return name.includes(bare);
  return op === '=' ? globMatches(bare, name) : !globMatches(bare, name);
}

/**
 * Whether `text` is `pattern`, where each `*` of the pattern stands for any run of characters
 * (none included) and every other character for itself. No regular expression: one built from
 * the pattern backtracks, and a tenant's filter of many `*`s on a long name held the event loop
 * for minutes. Here each literal piece between `*`s is found once, leftmost after the previous
 * one (leftmost leaves the most room for the rest, so it never needs to be undone): time is
 * bounded by the pattern's length times the name's, whatever the pattern.
 */
export function globMatches(pattern: string, text: string): boolean {
  const pieces = pattern.split('*');
  if (pieces.length === 1) return text === pattern;
  const first = pieces[0]!;
  const last = pieces[pieces.length - 1]!;
  if (text.length < first.length + last.length || !text.startsWith(first) || !text.endsWith(last)) return false;
  const end = text.length - last.length;
  let at = first.length;
  for (const piece of pieces.slice(1, -1)) {
    const found = text.indexOf(piece, at);
    if (found < 0 || found + piece.length > end) return false;
    at = found + piece.length;
  }
  return true;
}

function compare(a: number, op: Op, b: number): boolean {
  switch (op) {
    case '=':
      return a === b;
    case '!=':
      return a !== b;
    case '>':
      return a > b;
    case '>=':
      return a >= b;
    case '<':
      return a < b;
    case '<=':
      return a <= b;
    default:
      return false;
  }
}

export function matchesFilter(row: Listed, terms: Term[], projectSlug: string): boolean {
  return terms.every((t) =>
    t.field === 'name'
      ? nameMatches(row.name, t.op, t.value, projectSlug)
      : compare(new Date(row[t.field]).getTime(), t.op, Date.parse(t.value)),
  );
}

/** The rows ordered as `orderBy` says (default: newest first), ties by id. */
export function ordered<R extends Listed & { id: string }>(rows: R[], orderBy: string | undefined): R[] {
  const m = /^\s*(created_at|updated_at)(?:\s+(asc|desc))?\s*$/i.exec(orderBy ?? 'created_at desc');
  if (!m) throw badRequest('orderBy is created_at or updated_at, optionally followed by asc or desc.', 'orderBy');
  const field = m[1]!.toLowerCase() as 'created_at' | 'updated_at';
  const sign = (m[2] ?? 'asc').toLowerCase() === 'desc' ? -1 : 1;
  return [...rows].sort(
    (a, b) => sign * (new Date(a[field]).getTime() - new Date(b[field]).getTime()) || sign * a.id.localeCompare(b.id),
  );
}

/** One page of already filtered and ordered rows; the cursor is the last row's id. */
export function pageAfter<R extends { id: string }>(
  rows: R[],
  after: string | undefined,
  limit: number,
): { page: R[]; next: string | null } {
  let from = 0;
  if (after !== undefined) {
    const id = Buffer.from(after, 'base64url').toString('utf8');
    from = rows.findIndex((r) => r.id === id) + 1;
    if (from === 0) throw badRequest('after is not a cursor of this list.', 'after');
  }
  const page = rows.slice(from, from + limit);
  const more = from + page.length < rows.length;
  return { page, next: more ? Buffer.from(page[page.length - 1]!.id, 'utf8').toString('base64url') : null };
}

/** `filter`, then `orderBy`, then one page after `after`: what a v2 list route answers with. */
export function filteredPage<R extends Listed & { id: string }>(
  rows: R[],
  q: { filter?: string; orderBy?: string; after?: string; limit: number },
  projectSlug: string,
): { page: R[]; next: string | null } {
  const terms = parseFilter(q.filter);
  const matching = ordered(
    rows.filter((r) => matchesFilter(r, terms, projectSlug)),
    q.orderBy,
  );
  return pageAfter(matching, q.after, q.limit);
}
