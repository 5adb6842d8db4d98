/**
 * Attack: root on the container host through a deployment's environment
 * variables. The Podman client runs as root on the host; had a replica's
 * variables reached its environment, `LD_PRELOAD` naming a shared object the
 * tenant uploaded (a volume file, whose host path is predictable) would run
 * the tenant's code as root in the client, and `LD_DEBUG` would make the
 * host's dynamic linker report into the replica's log.
 *
 * The attacker has one ordinary project key. The library marks every process
 * that loads it (a file named after its pid); the test proves that no host
 * process loaded it while the variables did reach the container, that the
 * library does load where it is named (so a broken library cannot pass), and
 * that values an environment file cannot hold (several lines, a carriage
 * return) arrive intact.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { startPodmanPlatform, type PodmanPlatform } from '../helpers/podman-platform';
import { call, eventually } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

let host: PodmanPlatform;
let attacker: Tenant;
/** Where the library leaves its marks on this host: one empty file per process that loaded it. */
let markerDir: string;
let library: Buffer;
const work = mkdtempSync(path.join(tmpdir(), 'gantry-preload-'));

before(async () => {
  markerDir = path.join(work, 'marks');
  execFileSync('mkdir', ['-m', '0777', markerDir]);
  writeFileSync(
    path.join(work, 'preload.c'),
    `#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void mark(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%d", ${JSON.stringify(markerDir)}, (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
  if (fd >= 0) close(fd);
  fprintf(stderr, "gantry-preload-marker: loaded into pid %d\\n", (int)getpid());
}
`,
  );
  execFileSync('cc', ['-shared', '-fPIC', '-o', path.join(work, 'preload.so'), path.join(work, 'preload.c')]);
  library = readFileSync(path.join(work, 'preload.so'));
  host = await startPodmanPlatform();
  attacker = await createTenant(host.p.db);
});
after(async () => {
  await host?.stop();
  rmSync(work, { recursive: true, force: true });
});

const api = (method: string, url: string, json?: unknown) =>
  call(host.p.baseUrl, method, `/v1${url}`, { key: attacker.key, json });

test("a deployment's LD_PRELOAD of its own volume file reaches its container and no host process", async () => {
  // The shared object, uploaded as the CLI uploads a volume's files, and a volume of it.
  const grant = await api('POST', '/storage/upload-request', { filename: 'lib/preload.so' });
  assert.equal(grant.status, 200, JSON.stringify(grant.body));
  assert.equal((await fetch(grant.body.upload_url.url, { method: 'PUT', body: library })).status, 200);
  const volume = await api('POST', '/deployments/storage/volumes', {
    name: 'lib',
    type: 'readOnly',
    content: { type: 'files', source_prefix: 'lib' },
  });
  assert.equal(volume.status, 200, JSON.stringify(volume.body));
  // Where the host keeps the volume's first version (providers/containers/volume-store.ts).
  const hostPath = path.join(host.p.config.dataDir, 'deployment-volumes', volume.body.id, 'v1', 'preload.so');

  // Values no line of an environment file holds: a key of several lines (with a carriage return), as a secret.
  const pem = '-----BEGIN TEST KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\r\n0Wq=\n-----END TEST KEY-----\n';
  assert.equal((await api('POST', '/deployments/secrets', { name: 'signing-key', value: pem })).status, 200);
  const environment = {
    LD_PRELOAD: hostPath,
    LD_DEBUG: 'statistics',
    NOTES: 'first line\nsecond line',
    SPACED: '  a=b # not a comment  ',
    EMPTY: '',
  };
  const dep = await host.deploy(attacker.key, 'preload', {
    volumes: [{ name: 'lib', mount_path: '/opt/lib' }],
    environment_variables: [
      ...Object.entries(environment).map(([name, value]) => ({ name, value })),
      { name: 'SIGNING_KEY', value_from_secret: 'signing-key' },
    ],
  });

  // The replica runs, with every variable as it was given: the launch went through Podman.
  const env = async (name: string) => (await host.viaGateway(attacker.key, 'preload', `/env?name=${name}`)).text;
  for (const [name, value] of Object.entries(environment)) assert.equal(await env(name), value, name);
  assert.equal(await env('SIGNING_KEY'), pem);
  assert.equal(
    (await host.viaGateway(attacker.key, 'preload', '/file?path=/opt/lib/preload.so')).status,
    200,
    'the library is in the container, at its mount path',
  );
  // The dynamic linker of the container's own process (pid 1) reported into the log: LD_DEBUG reached it.
  // (Each line of the log as the API gives it starts with its replica's id.)
  const linkerPids = (lines: string[]) =>
    new Set(lines.flatMap((l) => /^\[[^\]]+\]\s+(\d+):\s+runtime linker statistics/.exec(l)?.[1] ?? []));
  const lines = await eventually(
    () => api('GET', `/deployments/${dep.id}/logs`).then((r) => r.body.lines as string[]),
    (ls) => linkerPids(ls).has('1'),
  );

  // No host process loaded the library, nor had its dynamic linker report into the replica's log.
  assert.deepEqual(readdirSync(markerDir), [], 'host processes loaded the tenant library');
  assert.deepEqual([...linkerPids(lines)], ['1'], lines.join('\n'));
  assert.ok(!lines.some((l) => l.includes('gantry-preload-marker')), lines.join('\n'));
  // Nothing of the replica's variables is left on the host once it has started: no secret in
  // Podman's store, and of its launch's directory (replica-environment.ts) only conmon's pid file.
  const secrets = host.podman(['secret', 'ls', '--format', '{{.Name}}']).split('\n');
  assert.deepEqual(
    secrets.filter((s) => s.startsWith('gantry-')),
    [],
  );
  const launches = path.join(host.p.config.dataDir, 'podman', 'replica-env');
  const left = readdirSync(launches, { recursive: true, withFileTypes: true }).filter((e) => !e.isDirectory());
  assert.deepEqual(
    left.map((e) => e.name),
    ['conmon.pid'],
  );

  // The control: the very file, named in LD_PRELOAD of a host process, does load and mark.
  const loaded = spawnSync('/bin/true', { env: { PATH: '/usr/bin:/bin', LD_PRELOAD: hostPath } });
  assert.equal(loaded.status, 0);
  assert.deepEqual(readdirSync(markerDir), [String(loaded.pid)]);
});
