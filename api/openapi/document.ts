import { OpenAPIRegistry, OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';

export function createRegistry(): OpenAPIRegistry {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'bearerAuth', {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key of the project: `Authorization: Bearer <API_KEY>`',
  });
  return registry;
}

/** Marks an operation whose route refuses body fields its schema does not name (`strict`). */
export const STRICT_EXTENSION = 'x-gantry-strict';

type Schema = { $ref?: string; type?: unknown; additionalProperties?: unknown; [word: string]: unknown };
type Document = ReturnType<OpenApiGeneratorV31['generateDocument']>;

/**
 * States in the document what a strict route enforces: its request body objects take no other
 * fields (additionalProperties: false). Done here, once, from the route's own flag, so that the
 * refusal ("Unknown field") and the document are one rule.
 */
function closeStrictBodies(document: Document): Document {
  const components = (document.components?.schemas ?? {}) as Record<string, Schema>;
  const resolve = (schema: Schema): Schema =>
    schema.$ref ? (components[schema.$ref.replace('#/components/schemas/', '')] ?? schema) : schema;
  for (const item of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(item as Record<string, Record<string, unknown>>)) {
      if (typeof operation !== 'object' || operation === null || !(STRICT_EXTENSION in operation)) continue;
      delete operation[STRICT_EXTENSION];
      const body = operation.requestBody as { content?: Record<string, { schema?: Schema }> } | undefined;
      for (const media of Object.values(body?.content ?? {})) {
        const schema = media.schema && resolve(media.schema);
        if (schema && schema.type === 'object' && schema.additionalProperties === undefined) {
          schema.additionalProperties = false;
        }
      }
    }
  }
  return document;
}

/**
 * Text PostgreSQL can store, as a JSON Schema pattern: no NUL. parseOrThrow refuses NUL and half
 * of a UTF-16 surrogate pair in every string of every request (findUnstorableText in
 * api/validation.ts), values and object keys alike, before any schema; stated here once for every
 * string the document describes in a request. Only NUL is spelled out: an unpaired surrogate is not
 * Unicode text at all (JSON text must be, RFC 8259), and a pattern naming one is not a regular
 * expression that every reader accepts (Rust's regex, in schemathesis' validator, refuses it).
 */
export const STORABLE_TEXT = '^[^\\u0000]*$';
const STORABLE_NAMES = { pattern: STORABLE_TEXT };

/**
 * What a free-form value (z.unknown(), the other fields of an open object) may hold under that rule:
 * any JSON whose text is storable. Three levels deep, not recursive: generators (schemathesis)
 * inline references, and a value nested deeper is still accepted, only not described.
 */
function storableJsonComponents(): Record<string, Schema> {
  const scalar = [{ type: 'string', pattern: STORABLE_TEXT }, { type: ['number', 'boolean', 'null'] }];
  const level = (inner: Schema | undefined): Schema => ({
    anyOf: inner
      ? [
          ...scalar,
          { type: 'array', items: inner },
          { type: 'object', propertyNames: STORABLE_NAMES, additionalProperties: inner },
        ]
      : scalar,
  });
  return {
    StorableJson0: level(undefined),
    StorableJson1: level({ $ref: '#/components/schemas/StorableJson0' }),
    StorableJson: level({ $ref: '#/components/schemas/StorableJson1' }),
  };
}
const STORABLE_JSON = { $ref: '#/components/schemas/StorableJson' };

/** Whether a schema says nothing about its value (z.unknown(), z.any()): any JSON. */
const SCHEMA_WORDS = ['$ref', 'type', 'anyOf', 'oneOf', 'allOf', 'not', 'enum', 'const', 'properties', 'items'];
const isFreeForm = (schema: Schema) => !SCHEMA_WORDS.some((w) => w in schema);

/** States the storable-text rule in one request schema, in place (components once each: `seen`). */
function requireStorableText(schema: Schema, components: Record<string, Schema>, seen: Set<string>): void {
  if (schema.$ref) {
    const name = schema.$ref.replace('#/components/schemas/', '');
    if (seen.has(name) || !components[name]) return;
    seen.add(name);
    requireStorableText(components[name], components, seen);
    return;
  }
  const s = schema as Record<string, unknown>;
  const types = Array.isArray(s.type) ? s.type : [s.type];
  if (
    types.includes('string') &&
    s.pattern === undefined &&
    s.enum === undefined &&
    s.const === undefined &&
    s.format === undefined
  ) {
    s.pattern = STORABLE_TEXT;
  }
  if (types.includes('object') || s.properties !== undefined) {
    s.propertyNames ??= STORABLE_NAMES;
    if (s.additionalProperties === undefined || s.additionalProperties === true) s.additionalProperties = STORABLE_JSON;
  }
  for (const key of ['properties', 'patternProperties'] as const) {
    const props = s[key] as Record<string, Schema> | undefined;
    for (const [name, sub] of Object.entries(props ?? {})) {
      if (isFreeForm(sub)) props![name] = { ...sub, ...STORABLE_JSON };
      else requireStorableText(sub, components, seen);
    }
  }
  for (const key of ['items', 'additionalProperties', 'not'] as const) {
    const sub = s[key] as Schema | undefined;
    if (sub && typeof sub === 'object' && sub !== STORABLE_JSON) {
      if (isFreeForm(sub)) s[key] = { ...sub, ...STORABLE_JSON };
      else requireStorableText(sub, components, seen);
    }
  }
  for (const key of ['anyOf', 'oneOf', 'allOf', 'prefixItems'] as const) {
    for (const sub of (s[key] as Schema[] | undefined) ?? []) requireStorableText(sub, components, seen);
  }
}

type Parameter = { in?: string; required?: boolean; schema?: Schema };

/** A type without `null` (a text field or parameter has no JSON null: `null` there is a word). */
function dropNull(schema: Schema): void {
  if (Array.isArray(schema.type) && schema.type.includes('null')) {
    const types = schema.type.filter((t) => t !== 'null');
    schema.type = types.length === 1 ? types[0] : types;
  }
}

/** The fields of a form (multipart or URL-encoded) are text: none of them is null. */
function formFieldsWithoutNull(schema: Schema, components: Record<string, Schema>): void {
  const resolved = schema.$ref ? components[schema.$ref.replace('#/components/schemas/', '')] : schema;
  for (const field of Object.values((resolved?.properties as Record<string, Schema> | undefined) ?? {}))
    dropNull(field);
}

/**
 * A path or query parameter is text: it has no JSON null, and the word `null` is no number
 * (z.coerce.number() documents itself as nullable, yet refuses it as NaN). A path parameter is
 * always given.
 */
function withoutNull(parameter: Parameter): Schema {
  const schema = parameter.schema!;
  dropNull(schema);
  if (parameter.in === 'path') parameter.required = true;
  return schema;
}

/** Applies requireStorableText to every parameter and request body of the document. */
function statStorableText(document: Document): Document {
  document.components ??= {};
  document.components.schemas ??= {};
  const components = document.components.schemas as Record<string, Schema>;
  Object.assign(components, storableJsonComponents());
  const seen = new Set(['StorableJson0', 'StorableJson1', 'StorableJson']);
  for (const item of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(item as Record<string, Record<string, unknown>>)) {
      if (typeof operation !== 'object' || operation === null) continue;
      for (const parameter of (operation.parameters as Parameter[] | undefined) ?? []) {
        if (parameter.schema) requireStorableText(withoutNull(parameter), components, seen);
      }
      const body = operation.requestBody as { content?: Record<string, { schema?: Schema }> } | undefined;
      for (const [mediaType, media] of Object.entries(body?.content ?? {})) {
        if (!media.schema) continue;
        if (!mediaType.includes('json')) formFieldsWithoutNull(media.schema, components);
        requireStorableText(media.schema, components, seen);
      }
    }
  }
  return document;
}

export function generateDocument(registry: OpenAPIRegistry) {
  return statStorableText(closeStrictBodies(generateDocumentAsIs(registry)));
}

function generateDocumentAsIs(registry: OpenAPIRegistry) {
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Gantry API',
      version: '2.0.0',
      description:
        'Self-hostable control plane for a GPU cloud. Every route needs `Authorization: Bearer <API_KEY>`; ' +
        'errors are `{error: {message, type, param, code}}`.',
    },
  });
}
