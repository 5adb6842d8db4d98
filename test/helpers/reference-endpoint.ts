/**
 * A dedicated endpoint of the reference byte model (`gantry/reference-byte-tiny`, fast on CPU), made
 * the way a user makes one (the official SDK's beta.endpoints), ready to be called at the gateway
 * by its endpoint string. For the tests of what calls models for a user: batches, evaluations.
 */
import type { TestPlatform } from './platform';
import { eventually } from './platform';
import type { Tenant } from './tenants';
import { runningReplicaOrigins } from '../../db/deployments';

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

/** How many generations the endpoint's model servers have run (their own `/metrics` counter), summed over replicas. */
export async function modelServerRequests(p: TestPlatform, endpoint: string): Promise<number> {
  const [slug, name] = endpoint.split('/');
  const { rows } = await p.db.query<{ container_deployment_id: string }>(
    `SELECT ed.container_deployment_id FROM endpoint_deployments ed
       JOIN endpoints e ON e.id = ed.endpoint_id JOIN projects p ON p.id = e.project_id
      WHERE p.slug = $1 AND e.name = $2 AND ed.container_deployment_id IS NOT NULL`,
    [slug, name],
  );
  let total = 0;
  for (const { container_deployment_id } of rows) {
    for (const origin of await runningReplicaOrigins(p.db, container_deployment_id)) {
      const text = await (await fetch(`${origin}/metrics`)).text();
      total += Number(/^gantry_model_requests_total (\d+)$/m.exec(text)?.[1] ?? NaN);
    }
  }
  return total;
}

/** Uploads `lines` (one JSON value each) as a JSONL file of purpose batch-api (or `purpose`); its id. */
export async function uploadBatchInput(
  p: TestPlatform,
  key: string,
  lines: unknown[],
  purpose: 'batch-api' | 'eval' = 'batch-api',
): Promise<string> {
  const body = new FormData();
  body.append('purpose', purpose);
  body.append('file_name', 'batch.jsonl');
  const text = lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n';
  body.append('file', new Blob([text]), 'batch.jsonl');
  const res = await fetch(`${p.baseUrl}/v1/files/upload`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
    body,
  });
  const file = (await res.json()) as { id: string };
  if (res.status !== 200) throw new Error(`upload failed: ${JSON.stringify(file)}`);
  return file.id;
}
