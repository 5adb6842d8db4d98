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

type Schema = { $ref?: string; type?: unknown; additionalProperties?: unknown };
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

export function generateDocument(registry: OpenAPIRegistry) {
  return closeStrictBodies(generateDocumentAsIs(registry));
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
