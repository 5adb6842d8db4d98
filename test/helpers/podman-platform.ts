/**
 * A platform whose container host runs rootful Podman, with the example replica
 * (examples/http-replica) in a local registry it pulls from: what the tests of
 * what a tenant's container can reach start from. The replica is the probe:
 * through the gateway, /env answers one of its variables, /file reads a path
 * inside its container and /connect opens a TCP connection from it.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';

import { startLocalRegistry, type LocalRegistry } from './image-registry';
import { call, eventually, startTestPlatform, type TestPlatform } from './platform';

/**
 * The body of a deployment of the tests' own image: one replica serving `/health` on 8080, stopped
 * within a second; `spec` overrides any field.
 */
export const testDeploymentBody = (name: string, image: string, spec: Record<string, unknown> = {}) => ({
  name,
  image,
  gpu_type: 'h100-80gb',
  port: 8080,
  health_check_path: '/health',
  min_replicas: 1,
  max_replicas: 1,
  termination_grace_period_seconds: 1,
  ...spec,
});

export interface PodmanPlatform {
  p: TestPlatform;
  /** The example replica's image reference, as a deployment names it. */
  image: string;
  /** `podman args…` as the platform's container host runs it (podmanOf). */
  podman(args: string[]): string;
  /** What the replica of `key`'s deployment `name` answers on `route`, through the gateway. */
  viaGateway(key: string, name: string, route: string): Promise<{ status: number; text: string }>;
  /** Creates the deployment (the example replica unless `spec` says otherwise) and waits until it is Ready. */
  deploy(key: string, name: string, spec: Record<string, unknown>): Promise<{ id: string }>;
  stop(): Promise<void>;
}

/**
 * `podman args…` as the container host of the platform with this data directory runs it: with its
 * containers.conf and storage.conf (podman-engine.ts), so it sees the same containers and images.
 */
export function podmanOf(dataDir: string): (args: string[]) => string {
  const conf = (file: string) => path.join(dataDir, 'podman', file);
  const env = {
    ...process.env,
    CONTAINERS_CONF: conf('containers.conf'),
    CONTAINERS_STORAGE_CONF: conf('storage.conf'),
  };
  return (args) => execFileSync('podman', args, { encoding: 'utf8', env });
}

export async function startPodmanPlatform(
  env: Record<string, string> = {},
  /** `containers: false`: no container host in the test process (a test runs real host processes instead). */
  opts: { containers?: boolean } = {},
): Promise<PodmanPlatform> {
  const dataDir = process.env.GANTRY_DATA_DIR ?? path.resolve(__dirname, '../../.data');
  const registry: LocalRegistry = await startLocalRegistry(dataDir);
  let p: TestPlatform | undefined;
  try {
    const image = await registry.publish('http-replica');
    p = await startTestPlatform({
      containerRuntime: 'podman',
      containers: opts.containers,
      env: { GANTRY_INSECURE_REGISTRIES: registry.address, ...env },
    });
    const platform = p;
    return {
      p: platform,
      image,
      podman(args) {
        return podmanOf(platform.config.dataDir)(args);
      },
      async viaGateway(key, name, route) {
        const res = await call<unknown>(platform.gatewayUrl, 'GET', `/v1/deployments/${name}${route}`, { key });
        return { status: res.status, text: typeof res.body === 'string' ? res.body : JSON.stringify(res.body) };
      },
      async deploy(key, name, spec) {
        const created = await call(platform.baseUrl, 'POST', '/v1/deployments', {
          key,
          json: testDeploymentBody(name, image, spec),
        });
        if (created.status !== 200)
          throw new Error(`deploy ${name}: ${created.status} ${JSON.stringify(created.body)}`);
        return eventually(
          () => call(platform.baseUrl, 'GET', `/v1/deployments/${name}`, { key }).then((r) => r.body),
          (d) => d.status === 'Ready',
          120_000,
        );
      },
      async stop() {
        await platform.stop();
        await registry.stop();
      },
    };
  } catch (err) {
    await p?.stop();
    await registry.stop();
    throw err;
  }
}
