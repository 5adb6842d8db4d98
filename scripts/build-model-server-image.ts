/**
 * Builds a model server's image with Podman from what this machine has, as
 * scripts/build-example-images.ts builds the examples: FROM scratch, with this machine's Python
 * (the one the server's virtual environment was made from, its standard library only), that
 * environment's packages, the server's code, and the shared libraries they load. No public
 * registry is needed. Two servers, one way of building:
 *
 * - the reference model server (trainers/reference/gantry_trainer/serve.py; .venv, JAX on CPU),
 *   GANTRY_MODEL_SERVER_IMAGE, some 660 MB;
 * - the PyTorch model server (trainers/torch/gantry_torch_trainer/serve.py; .venv-torch, torch,
 *   transformers, peft), GANTRY_TORCH_MODEL_SERVER_IMAGE. PyPI's torch is the CUDA build, whose
 *   libraries (nvidia-*, some 3 GB) `import torch` loads even on CPU, so they stay; triton (1 GB)
 *   only compiles GPU kernels and CPU torch never imports it, so it is left out. About 4.6 GB.
 *
 *   node --require tsx/cjs scripts/build-model-server-image.ts [--torch]    # prints the tag
 *
 * The layout is the Gantry image's (Dockerfile): the reference server runs as
 * `/app/.venv/bin/python -m gantry_trainer.serve` with PYTHONPATH=/app/trainers/reference, so
 * either image serves the reference model on the podman runtime; the torch one as
 * `/app/.venv-torch/bin/python -m gantry_torch_trainer.serve` with PYTHONPATH=/app/trainers/torch.
 * Tagged `localhost/gantry/<server>:<digest of what went in>`: a second build of the same content
 * is skipped.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { PodmanEngine } from '../providers/containers/podman/podman-engine';
import {
  MODEL_SERVER_PYTHON,
  MODEL_SERVER_PYTHONPATH,
  TORCH_MODEL_SERVER_PYTHON,
  TORCH_MODEL_SERVER_PYTHONPATH,
} from '../shared/model-server-image';
import { copyInto, sharedLibraries } from './build-example-images';

const ROOT = path.resolve(__dirname, '..');

/** What goes into one model server's image. */
interface ModelServerImage {
  repository: string;
  /** The virtual environment (its packages) and where the image has it. */
  venv: string;
  python: string;
  /** The trainer directory (its requirements.txt, and its package with the server) and where the image has it. */
  trainer: string;
  pythonPath: string;
  module: string;
  /** Top-level site-packages entries the server never imports. */
  packagesLeftOut: ReadonlySet<string>;
  /** Environment of the server beyond PYTHONPATH, HOST and HOME. */
  env: string;
}

export const REFERENCE_SERVER_IMAGE: ModelServerImage = {
  repository: 'localhost/gantry/reference-model-server',
  venv: path.join(ROOT, '.venv'),
  python: MODEL_SERVER_PYTHON,
  trainer: path.join(ROOT, 'trainers/reference'),
  pythonPath: MODEL_SERVER_PYTHONPATH,
  module: 'gantry_trainer',
  packagesLeftOut: new Set(),
  env: 'JAX_PLATFORMS=cpu',
};

export const TORCH_SERVER_IMAGE: ModelServerImage = {
  repository: 'localhost/gantry/torch-model-server',
  venv: path.join(ROOT, '.venv-torch'),
  python: TORCH_MODEL_SERVER_PYTHON,
  trainer: path.join(ROOT, 'trainers/torch'),
  pythonPath: TORCH_MODEL_SERVER_PYTHONPATH,
  module: 'gantry_torch_trainer',
  // GPU kernel compilers and the installer: CPU torch imports neither.
  packagesLeftOut: new Set(['triton', 'pip']),
  env: 'HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1',
};

/** Parts of the standard library a model server never imports: tests, GUIs, the installer. */
const STDLIB_LEFT_OUT = new Set(['site-packages', 'test', 'idlelib', 'tkinter', 'turtledemo', 'ensurepip']);

function python(venv: string, code: string): string {
  return execFileSync(path.join(venv, 'bin/python'), ['-c', code], { encoding: 'utf8' }).trim();
}

/** Every shared object under `dir` (the packages' compiled modules and bundled libraries). */
function sharedObjects(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && /\.so(\.|$)/.test(e.name))
    .map((e) => path.join(e.parentPath, e.name));
}

/** The tag of the image for this machine's server environment and code. */
function contentTag(image: ModelServerImage, basePrefix: string, version: string): string {
  const hash = createHash('sha256');
  hash.update(version).update(basePrefix);
  hash.update(readFileSync(path.join(image.trainer, 'requirements.txt')));
  hash.update(readFileSync(path.join(ROOT, 'scripts/build-model-server-image.ts')));
  for (const e of readdirSync(path.join(image.trainer, image.module), { withFileTypes: true }))
    if (e.isFile() && e.name.endsWith('.py')) hash.update(e.name).update(readFileSync(path.join(e.parentPath, e.name)));
  return `${image.repository}:${hash.digest('hex').slice(0, 16)}`;
}

/** Earlier builds (some 660 MB or 4.6 GB each), but for those a replica still runs from: Podman keeps those. */
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
export async function buildModelServerImage(
  engine: PodmanEngine,
  image: ModelServerImage = REFERENCE_SERVER_IMAGE,
): Promise<string> {
  const basePrefix = python(image.venv, 'import sys; print(sys.base_prefix)');
  const version = python(image.venv, 'import sys; print("%d.%d" % sys.version_info[:2])');
  const tag = contentTag(image, basePrefix, version);
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
    // The virtual environment where the image has it (/app/.venv...), pointing at that interpreter.
    const venvInImage = path.join(rootfs, path.dirname(path.dirname(image.python)));
    const packages = path.join(image.venv, lib, 'site-packages');
    const leftOut = (src: string) => image.packagesLeftOut.has(path.relative(packages, src).split(path.sep)[0]);
    cpSync(packages, path.join(venvInImage, lib, 'site-packages'), {
      recursive: true,
      filter: (src) => !src.includes('__pycache__') && !leftOut(src),
    });
    mkdirSync(path.join(venvInImage, 'bin'), { recursive: true });
    symlinkSync(`/opt/python/bin/python${version}`, path.join(venvInImage, 'bin/python'));
    writeFileSync(
      path.join(venvInImage, 'pyvenv.cfg'),
      `home = /opt/python/bin\ninclude-system-site-packages = false\nversion = ${version}\n`,
    );
    cpSync(path.join(image.trainer, image.module), path.join(rootfs, image.pythonPath, image.module), {
      recursive: true,
      filter: (src) => !src.includes('__pycache__'),
    });
    // The libraries the interpreter and the packages load, at the paths they are loaded from
    // (libpython by the interpreter's own run path), but for those in the directories copied above.
    const inside = [path.join(basePrefix, lib), image.venv].map((d) => d + path.sep);
    const libraries = new Set(
      [
        pythonBin,
        ...sharedObjects(path.join(basePrefix, lib, 'lib-dynload')),
        ...sharedObjects(packages).filter((so) => !leftOut(so)),
      ].flatMap((binary) => {
        try {
          return sharedLibraries(binary);
        } catch {
          return []; // ldd: not a dynamic object (a static one needs nothing)
        }
      }),
    );
    for (const library of libraries) if (!inside.some((d) => library.startsWith(d))) copyInto(rootfs, library);
    mkdirSync(path.join(rootfs, 'tmp'), { mode: 0o1777 });
    execFileSync('chmod', ['1777', path.join(rootfs, 'tmp')]);
    writeFileSync(
      path.join(context, 'Containerfile'),
      [
        `# ${image.repository}, built by scripts/build-model-server-image.ts.`,
        'FROM scratch',
        'COPY rootfs/ /',
        `ENV PYTHONPATH=${image.pythonPath} ${image.env} HOST=0.0.0.0 HOME=/tmp`,
        'USER 65534:65534',
        `ENTRYPOINT ["${image.python}", "-m", "${image.module}.serve"]`,
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
  const torch = process.argv.includes('--torch');
  console.log(await buildModelServerImage(engine, torch ? TORCH_SERVER_IMAGE : REFERENCE_SERVER_IMAGE));
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
