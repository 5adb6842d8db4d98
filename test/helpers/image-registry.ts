/**
 * A local OCI image registry for the container tests (Debian's `docker-registry`,
 * the CNCF distribution registry), holding the example images this project
 * builds (scripts/build-example-images.ts). The podman runtime pulls from it as
 * it would from any registry; images are removed from Podman's local store after
 * the push, so a replica's launch really downloads them.
 */
import { randomUUID } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { PodmanEngine } from '../../providers/containers/podman/podman-engine';
import { freePort } from '../../platform/ports';
import { buildExampleImage, pushExampleImage, type ExampleImage } from '../../scripts/build-example-images';

export interface LocalRegistry {
  /** host:port, as an image reference names it. */
  address: string;
  /**
   * Builds an example image and pushes it here, at `repository` (`gantry-examples/<name>` unless
   * told: a project's path, `<project slug>/<name>`); answers its reference.
   */
  publish(name: ExampleImage, repository?: string): Promise<string>;
  stop(): Promise<void>;
}

export async function startLocalRegistry(dataDir: string): Promise<LocalRegistry> {
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-registry-'));
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  writeFileSync(
    path.join(dir, 'config.yml'),
    [
      'version: 0.1',
      'log: {level: warn}',
      `storage: {filesystem: {rootdirectory: ${path.join(dir, 'data')}}}`,
      `http: {addr: "${address}"}`,
      '',
    ].join('\n'),
  );
  // Its log (a HEAD for each blob not yet pushed is logged as an error) goes to a file, quoted on failure.
  const log = openSync(path.join(dir, 'registry.log'), 'a');
  const server: ChildProcess = spawn('docker-registry', ['serve', path.join(dir, 'config.yml')], {
    stdio: ['ignore', log, log],
  });
  closeSync(log);
  const exited = new Promise((resolve) => server.once('exit', resolve));
  for (let i = 0; ; i++) {
    const up = await fetch(`http://${address}/v2/`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (i > 100 || server.exitCode !== null) {
      const said = readFileSync(path.join(dir, 'registry.log'), 'utf8').slice(-2000);
      throw new Error(`docker-registry did not start on ${address}: ${said}`);
    }
    await sleep(100);
  }
  const engine = new PodmanEngine(path.join(dataDir, 'podman'));
  const published: string[] = [];
  return {
    address,
    async publish(name, repository) {
      // A tag of this call's own: test files running at once share the machine's Podman storage,
      // and another's build or removal of the common tag would take this one's image away.
      const tag = `localhost/gantry-examples/${name}:${randomUUID()}`;
      await buildExampleImage(engine, name, tag);
      const ref = await pushExampleImage(engine, name, address, true, repository, tag);
      await engine.podman(['rmi', '--ignore', tag, ref]);
      published.push(ref);
      return ref;
    },
    async stop() {
      server.kill();
      await exited;
      rmSync(dir, { recursive: true, force: true });
      // What replicas pulled from this registry: its address dies with it, so every run would
      // leave another copy in Podman's storage. (Still in use by a container: left to Podman.)
      await engine.podman(['rmi', '--ignore', ...published]).catch(() => undefined);
    },
  };
}
