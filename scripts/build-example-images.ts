/**
 * Builds the example images with Podman from what this machine has (no public
 * registry is reachable, so no base image is pulled): each image is FROM
 * scratch, with this machine's Node.js binary and the shared libraries `ldd`
 * says it loads, and the example's own files (TypeScript bundled by esbuild).
 *
 *   node --require tsx/cjs scripts/build-example-images.ts [--push <registry host:port>] [--insecure]
 *
 * Tagged `localhost/gantry-examples/<name>:1`; with --push, also pushed to the
 * registry as `<registry>/gantry-examples/<name>:1`.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { build } from 'esbuild';

import { PodmanEngine } from '../providers/containers/podman/podman-engine';

const ROOT = path.resolve(__dirname, '..');

/**
 * The example images: the folder holding the Containerfile, the files it puts under /app as they
 * are, and the TypeScript entry points it bundles (with what they import) into one file each.
 */
export const EXAMPLE_IMAGES: Record<string, { dir: string; copy: string[]; bundle: Record<string, string> }> = {
  'http-replica': { dir: 'examples/http-replica', copy: ['server.mjs'], bundle: {} },
  'queue-worker': { dir: 'examples/queue-worker', copy: [], bundle: { 'worker.mjs': 'worker.ts' } },
};

export type ExampleImage = 'http-replica' | 'queue-worker';

export const localTag = (name: ExampleImage) => `localhost/gantry-examples/${name}:1`;

/** The shared libraries a binary loads, with the dynamic loader, as `ldd` lists them. */
export function sharedLibraries(binary: string): string[] {
  const out = execFileSync('ldd', [binary], { encoding: 'utf8' });
  return [...out.matchAll(/(\/\S+) \(0x/g)].map((m) => m[1]);
}

/** Copies `file` into the image's root filesystem at `at` (its own path by default). */
export function copyInto(rootfs: string, file: string, at = file): void {
  const target = path.join(rootfs, at);
  mkdirSync(path.dirname(target), { recursive: true });
  copyFileSync(file, target);
}

/**
 * Builds one example image; answers its tag: `localTag(name)`, or `tag` for a caller that must not
 * share that one (another caller may remove it meanwhile: test/helpers/image-registry.ts does).
 */
export async function buildExampleImage(
  engine: PodmanEngine,
  name: ExampleImage,
  tag: string = localTag(name),
): Promise<string> {
  const spec = EXAMPLE_IMAGES[name];
  const context = mkdtempSync(path.join(tmpdir(), `gantry-image-${name}-`));
  try {
    const rootfs = path.join(context, 'rootfs');
    copyInto(rootfs, process.execPath, '/usr/local/bin/node');
    for (const lib of sharedLibraries(process.execPath)) copyInto(rootfs, lib);
    for (const f of spec.copy) copyInto(rootfs, path.join(ROOT, spec.dir, f), `/app/${f}`);
    // A /tmp anyone may write, as an image of a distribution has: the images run as nobody.
    mkdirSync(path.join(rootfs, 'tmp'));
    chmodSync(path.join(rootfs, 'tmp'), 0o1777);
    for (const [out, entry] of Object.entries(spec.bundle)) {
      await build({
        entryPoints: [path.join(ROOT, spec.dir, entry)],
        outfile: path.join(rootfs, 'app', out),
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node20',
        logLevel: 'error',
      });
    }
    copyFileSync(path.join(ROOT, spec.dir, 'Containerfile'), path.join(context, 'Containerfile'));
    // Readable by the image's unprivileged user whatever the umask of the process building it
    // (a Gantry process's is 077: a test that builds after starting the platform).
    execFileSync('chmod', ['-R', 'a+rX', rootfs]);
    await engine.podman(['build', '--quiet', '--network=none', '--tag', tag, context], {
      timeoutMs: 10 * 60_000,
    });
    return tag;
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
}

/**
 * Pushes a built example image (`source`: the tag it was built as) to a registry (at `repository`
 * there); answers the reference there.
 */
export async function pushExampleImage(
  engine: PodmanEngine,
  name: ExampleImage,
  registry: string,
  insecure: boolean,
  repository = `gantry-examples/${name}`,
  source = localTag(name),
): Promise<string> {
  const ref = `${registry}/${repository}:1`;
  await engine.podman(['push', '--quiet', ...(insecure ? ['--tls-verify=false'] : []), source, ref]);
  return ref;
}

async function main() {
  const args = process.argv.slice(2);
  const push = args.includes('--push') ? args[args.indexOf('--push') + 1] : undefined;
  const engine = new PodmanEngine(path.join(process.env.GANTRY_DATA_DIR ?? path.join(ROOT, '.data'), 'podman'));
  for (const name of Object.keys(EXAMPLE_IMAGES) as ExampleImage[]) {
    console.log(await buildExampleImage(engine, name));
    if (push) console.log(await pushExampleImage(engine, name, push, args.includes('--insecure')));
  }
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
