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

export function generateDocument(registry: OpenAPIRegistry) {
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
