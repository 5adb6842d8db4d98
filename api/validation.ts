/**
 * Turns zod failures into the spec's 400: `param` names the offending field,
 * `message` says what was expected. Also finds fields a strict route does not
 * know, so they can be refused by name.
 */
import { z, type ZodType } from 'zod';
import { type ApiError, badRequest } from './errors';

export type Location = 'body' | 'query' | 'path' | 'header';

function describe(issue: z.core.$ZodIssue, param: string): string {
  if (issue.code === 'invalid_type' && /received undefined/.test(issue.message)) {
    return `Missing required field '${param}'.`;
  }
  if (issue.code === 'unrecognized_keys') {
    return `Unknown field '${param}'.`;
  }
  return `Invalid value for '${param}': ${issue.message}.`;
}

export function zodErrorToApiError(error: z.ZodError, location: Location): ApiError {
  const issue = error.issues[0];
  if (issue.path.length === 0 && issue.code === 'invalid_type') {
    return badRequest(
      location === 'body' ? 'The request body must be a JSON object.' : `Invalid ${location} parameters.`,
      null,
      'invalid_request',
    );
  }
  const path = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0]] : issue.path;
  const param = path.map(String).join('.');
  return badRequest(
    describe(issue, param),
    param,
    issue.code === 'unrecognized_keys' ? 'unknown_field' : 'invalid_value',
  );
}

/** Names the first key of `input` that an object schema does not declare, if any. */
export function firstUnknownKey(schema: ZodType, input: unknown): string | null {
  if (!(schema instanceof z.ZodObject) || typeof input !== 'object' || input === null || Array.isArray(input)) {
    return null;
  }
  const known = new Set(Object.keys(schema.shape));
  return Object.keys(input).find((k) => !known.has(k)) ?? null;
}

/** NUL, or half of a UTF-16 surrogate pair: text PostgreSQL cannot store (and no client means). */
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * The path of the first string (value or object key) in `input` that holds unstorable text, if any.
 * Checked before any schema, for every route: a NUL byte in a query parameter or a lone surrogate
 * in a JSON string would otherwise reach PostgreSQL and fail there as a 500.
 */
export function findUnstorableText(input: unknown, at: string[] = [], depth = 0): string[] | null {
  if (typeof input === 'string') return UNSTORABLE.test(input) ? at : null;
  if (typeof input !== 'object' || input === null || depth > 64) return null;
  for (const [key, value] of Object.entries(input)) {
    if (UNSTORABLE.test(key)) return at;
    const found = findUnstorableText(value, [...at, key], depth + 1);
    if (found) return found;
  }
  return null;
}

/**
 * The official Python SDK and CLI send every option they were not given as JSON `null`. For a
 * field that may be left out and has no meaning for `null`, `null` is taken as left out; where a
 * schema gives `null` a meaning (nullable), it is kept. Applies to nested objects and to unions of
 * objects too (a key counts as left out only where every option could leave it out).
 */
export function withoutNullOptionals(schema: ZodType, input: unknown, depth = 0): unknown {
  if (typeof input !== 'object' || input === null || Array.isArray(input) || depth > 16) return input;
  const shapes = objectShapes(schema);
  if (!shapes.length) return input;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(input)) {
    const fields = shapes.map((shape) => shape[key]).filter((f): f is ZodType => f !== undefined);
    if (value === null && fields.length && fields.every((f) => absentNotNull(f))) continue;
    out[key] = fields.length === 1 ? withoutNullOptionals(fields[0]!, value, depth + 1) : value;
  }
  return out;
}

const absentNotNull = (field: ZodType) => field.safeParse(undefined).success && !field.safeParse(null).success;

/** The object shapes a value of `schema` may take, through optional, default, pipe and union wrappers. */
function objectShapes(schema: ZodType, depth = 0): Array<Record<string, ZodType>> {
  if (depth > 8) return [];
  if (schema instanceof z.ZodObject) return [schema.shape as Record<string, ZodType>];
  if (schema instanceof z.ZodUnion) return (schema.options as ZodType[]).flatMap((o) => objectShapes(o, depth + 1));
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable || schema instanceof z.ZodDefault) {
    return objectShapes(schema.def.innerType as ZodType, depth + 1);
  }
  if (schema instanceof z.ZodPipe) return objectShapes(schema.def.in as ZodType, depth + 1);
  return [];
}

export function parseOrThrow<S extends ZodType>(
  schema: S,
  input: unknown,
  location: Location,
  strict: boolean,
): z.output<S> {
  if (location === 'body') input = withoutNullOptionals(schema, input);
  if (strict) {
    const unknown = firstUnknownKey(schema, input);
    if (unknown !== null) {
      const what = location === 'query' ? 'query parameter' : 'field';
      throw badRequest(
        `Unknown ${what} '${unknown}'.`,
        unknown,
        location === 'query' ? 'unknown_parameter' : 'unknown_field',
      );
    }
  }
  const unstorable = findUnstorableText(input);
  if (unstorable) {
    const param = unstorable.join('.') || null;
    throw badRequest(
      `Invalid value for '${param ?? location}': text must not contain NUL characters or unpaired UTF-16 surrogates.`,
      param,
      'invalid_value',
    );
  }
  const result = schema.safeParse(input);
  if (!result.success) throw zodErrorToApiError(result.error, location);
  return result.data;
}
