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

/** `{object: 'list', data: [...], next_cursor}`: a list paged by an opaque cursor (null on the last page). */
export function cursorPageOf<T extends z.ZodType>(item: T) {
  return listOf(item).extend({ next_cursor: z.string().nullable() });
}

/** The id of a resource in a path or body: ids are generated (`<prefix>-<uuid>`), names are short. */
export const ResourceId = z.string().min(1).max(128);

/** `:id` of the paths that address one resource by id. */
export const IdParams = z.object({ id: ResourceId });

/** `:organizationId` of the organization-scoped paths. */
export const OrganizationParams = z.object({ organizationId: ResourceId });

/** A yes/no query parameter, spelled as the clients send it. */
export const QueryFlag = z.enum(['true', 'false']);

/** `{id, deleted: true}`: what a delete answers where the spec names the resource back. */
export const DeletedResponse = z.object({ id: z.string(), deleted: z.literal(true) });

/** `{}`: what an accepted request with nothing to report answers (the spec's empty objects). */
export const EmptyResponse = z.object({});

/** A response body of raw bytes (a file's content, an archive), documented as binary. */
export const BinaryResponse = z.string().meta({ format: 'binary' });

/**
 * The form a query timestamp read by Date.parse is documented in: an ISO 8601 date, optionally a
 * time (`T` or a space), optionally an offset; naive datetimes included (the Python CLI may send
 * them). Every string of this form is one Date.parse reads; the validation itself stays as
 * lenient as Date.parse, so the document promises no more than the API takes.
 */
export const TIMESTAMP_FORM =
  '^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])' +
  '([T ]([01]\\d|2[0-3]):[0-5]\\d(:[0-5]\\d(\\.\\d{1,9})?)?(Z|[+-]([01]\\d|2[0-3]):?[0-5]\\d)?)?$';
