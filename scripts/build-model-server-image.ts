/**
 * Builds the reference model server's image (trainers/reference/gantry_trainer/serve.py) with
 * Podman from what this machine has, as scripts/build-example-images.ts builds the examples: FROM
 * scratch, with this machine's Python (the one the trainer's .venv was made from, its standard
 * library only), the .venv's packages (JAX on CPU), the trainer's code, and the shared libraries
 * they load. No public registry is needed.
 *
 *   node --import tsx scripts/build-model-server-image.ts     # prints the tag
 *
 * The layout is the Gantry image's (Dockerfile): the server runs as
 * `/app/.venv/bin/python -m gantry_trainer.serve` with PYTHONPATH=/app/trainers/reference, so
 * either image serves endpoints on the podman runtime (GANTRY_MODEL_SERVER_IMAGE). Tagged
 * `localhost/gantry/reference-model-server:<digest of what went in>`: a second build of the same
 * content is skipped.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { PodmanEngine } from '../providers/containers/podman/podman-engine';
import { MODEL_SERVER_PYTHON, MODEL_SERVER_PYTHONPATH } from '../shared/model-server-image';
import { copyInto, sharedLibraries } from './build-example-images';

const ROOT = path.resolve(__dirname, '..');
const VENV = path.join(ROOT, '.venv');
const TRAINER = path.join(ROOT, 'trainers/reference');

/** Parts of the standard library a model server never imports: tests, GUIs, the installer. */
const STDLIB_LEFT_OUT = new Set(['site-packages', 'test', 'idlelib', 'tkinter', 'turtledemo', 'ensurepip']);

function python(code: string): string {
  return execFileSync(path.join(VENV, 'bin/python'), ['-c', code], { encoding: 'utf8' }).trim();
}

/** Every shared object under `dir` (the packages' compiled modules and bundled libraries). */
function sharedObjects(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && /\.so(\.|$)/.test(e.name))
    .map((e) => path.join(e.parentPath, e.name));
}

/** The tag of the image for this machine's trainer environment and code. */
function contentTag(basePrefix: string, version: string): string {
  const hash = createHash('sha256');
  hash.update(version).update(basePrefix);
  hash.update(readFileSync(path.join(TRAINER, 'requirements.txt')));
  hash.update(readFileSync(path.join(ROOT, 'scripts/build-model-server-image.ts')));
  for (const e of readdirSync(path.join(TRAINER, 'gantry_trainer'), { withFileTypes: true }))
    if (e.isFile() && e.name.endsWith('.py')) hash.update(e.name).update(readFileSync(path.join(e.parentPath, e.name)));
  return `localhost/gantry/reference-model-server:${hash.digest('hex').slice(0, 16)}`;
}

/** Earlier builds (some 660 MB each), but for those a replica still runs from: Podman keeps those. */
async function removeEarlierBuilds(engine: PodmanEngine, tag: string): Promise<void> {
  const [repository] = tag.split(':');
  const tags = (
    await engine.podman(['images', '--filter', `reference=${repository}`, '--format', '{{.Repository}}:{{.Tag}}'])
  )
    .split('\n')
    .filter((t) => t && t !== tag);
  for (const old of tags) await engine.podman(['rmi', old]).catch(() => undefined);
}

/** Builds the image unless this content's is already there; answers its tag. */
export async function buildModelServerImage(engine: PodmanEngine): Promise<string> {
  const basePrefix = python('import sys; print(sys.base_prefix)');
  const version = python('import sys; print("%d.%d" % sys.version_info[:2])');
  const tag = contentTag(basePrefix, version);
  const present = await engine.podman(['image', 'exists', tag]).then(
    () => true,
    () => false,
  );
  if (present) return tag;

  const context = mkdtempSync(path.join(tmpdir(), 'gantry-image-model-server-'));
  try {
    const rootfs = path.join(context, 'rootfs');
    const lib = `lib/python${version}`;
    // The interpreter and its standard library under /opt/python, in the layout it finds itself by.
    const pythonBin = path.join(basePrefix, 'bin', `python${version}`);
    copyInto(rootfs, pythonBin, `/opt/python/bin/python${version}`);
    for (const e of readdirSync(path.join(basePrefix, lib), { withFileTypes: true })) {
      if (STDLIB_LEFT_OUT.has(e.name)) continue;
      cpSync(path.join(basePrefix, lib, e.name), path.join(rootfs, 'opt/python', lib, e.name), {
        recursive: true,
        filter: (src) => !src.includes('__pycache__'),
      });
    }
    mkdirSync(path.join(rootfs, 'opt/python', lib, 'site-packages'), { recursive: true });
    // The .venv at /app/.venv, pointing at that interpreter.
    const packages = path.join(VENV, lib, 'site-packages');
    cpSync(packages, path.join(rootfs, 'app/.venv', lib, 'site-packages'), {
      recursive: true,
      filter: (src) => !src.includes('__pycache__'),
    });
    mkdirSync(path.join(rootfs, 'app/.venv/bin'), { recursive: true });
    symlinkSync(`/opt/python/bin/python${version}`, path.join(rootfs, 'app/.venv/bin/python'));
    writeFileSync(
      path.join(rootfs, 'app/.venv/pyvenv.cfg'),
      `home = /opt/python/bin\ninclude-system-site-packages = false\nversion = ${version}\n`,
    );
    cpSync(path.join(TRAINER, 'gantry_trainer'), path.join(rootfs, MODEL_SERVER_PYTHONPATH, 'gantry_trainer'), {
      recursive: true,
      filter: (src) => !src.includes('__pycache__'),
    });
    // The libraries the interpreter and the packages load, at the paths they are loaded from
    // (libpython by the interpreter's own run path), but for those in the directories copied above.
    const inside = [path.join(basePrefix, lib), VENV].map((d) => d + path.sep);
    const libraries = new Set(
      [pythonBin, ...sharedObjects(path.join(basePrefix, lib, 'lib-dynload')), ...sharedObjects(packages)].flatMap(
        (binary) => {
          try {
            return sharedLibraries(binary);
          } catch {
            return []; // ldd: not a dynamic object (a static one needs nothing)
          }
        },
      ),
    );
    for (const library of libraries) if (!inside.some((d) => library.startsWith(d))) copyInto(rootfs, library);
    mkdirSync(path.join(rootfs, 'tmp'), { mode: 0o1777 });
    execFileSync('chmod', ['1777', path.join(rootfs, 'tmp')]);
    writeFileSync(
      path.join(context, 'Containerfile'),
      [
        '# The reference model server, built by scripts/build-model-server-image.ts.',
        'FROM scratch',
        'COPY rootfs/ /',
        `ENV PYTHONPATH=${MODEL_SERVER_PYTHONPATH} JAX_PLATFORMS=cpu HOST=0.0.0.0 HOME=/tmp`,
        'USER 65534:65534',
        `ENTRYPOINT ["${MODEL_SERVER_PYTHON}", "-m", "gantry_trainer.serve"]`,
        '',
      ].join('\n'),
    );
    await engine.podman(['build', '--quiet', '--network=none', '--tag', tag, context], { timeoutMs: 20 * 60_000 });
    await removeEarlierBuilds(engine, tag);
    return tag;
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
}

async function main() {
  const engine = new PodmanEngine(path.join(process.env.GANTRY_DATA_DIR ?? path.join(ROOT, '.data'), 'podman'));
  console.log(await buildModelServerImage(engine));
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
