/**
 * Deployments of the example HTTP replica (examples/http-replica/server.mjs),
 * run by the process runtime: what the deployment tests deploy, in one place.
 */
import path from 'node:path';
import { call, eventually, type TestPlatform } from './platform';

export const HTTP_REPLICA = path.resolve(__dirname, '../../examples/http-replica/server.mjs');

/** Deploys `name` (one replica of the example server unless told otherwise) and waits for it to be Ready. */
export async function deployHttpReplica(
  p: TestPlatform,
  key: string,
  name: string,
  spec: Record<string, unknown> = {},
): Promise<{ id: string; replica_events: Record<string, { replica_status: string }> }> {
  const created = await call(p.baseUrl, 'POST', '/v1/deployments', {
    key,
    json: {
      name,
      image: 'example/http-replica:1',
      gpu_type: 'h100-80gb',
      command: [process.execPath, HTTP_REPLICA],
      health_check_path: '/health',
      min_replicas: 1,
      max_replicas: 1,
      termination_grace_period_seconds: 1,
      ...spec,
    },
  });
  if (created.status !== 200) throw new Error(`deploy ${name}: ${created.status} ${JSON.stringify(created.body)}`);
  return eventually(
    () => call(p.baseUrl, 'GET', `/v1/deployments/${name}`, { key }).then((r) => r.body),
    (d) => d.status === 'Ready',
    30_000,
  );
}

/** Whether a replica's port answers its health check. */
export const serves = (port: number) =>
  fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1000) }).then(
    (r) => r.ok,
    () => false,
  );
