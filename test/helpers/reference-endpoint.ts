/**
 * A dedicated endpoint of the reference byte model (`gantry/reference-byte-tiny`, fast on CPU), made
 * the way a user makes one (the official SDK's beta.endpoints), ready to be called at the gateway
 * by its endpoint string. For the tests of what calls models for a user: batches, evaluations.
 */
import type { TestPlatform } from './platform';
import { eventually } from './platform';
import type { Tenant } from './tenants';

export const REFERENCE_MODEL = 'gantry/reference-byte-tiny';

/** Makes endpoint `name` with one replica of the reference model; answers its endpoint string once ready. */
export async function readyReferenceEndpoint(p: TestPlatform, tenant: Tenant, name: string): Promise<string> {
  const { Together } = require('together-ai') as typeof import('together-ai');
  const client = new Together({
    apiKey: tenant.key,
    baseURL: `${p.baseUrl}/v1`,
    projectID: tenant.projectId,
    maxRetries: 0,
  });
  const endpoint = await client.beta.endpoints.create({ name });
  await client.beta.endpoints.deployments.create(endpoint.id, {
    name: 'main',
    modelId: REFERENCE_MODEL,
    autoscaling: { minReplicas: 1, maxReplicas: 1 },
  });
  await eventually(
    async () => {
      const list = [];
      for await (const d of client.beta.endpoints.deployments.list(endpoint.id)) list.push(d);
      return list;
    },
    (list) => list.length === 1 && list[0].status.state === 'DEPLOYMENT_STATE_READY',
    90_000,
  );
  return `${tenant.projectSlug}/${name}`;
}
