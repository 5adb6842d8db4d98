/**
 * The environment Gantry gives the programs it runs (trainers, the speech
 * tools, ffmpeg, zstd): what they need to run, and none of Gantry's own
 * configuration. A child that inherited process.env would hold the database
 * URL with its password, the signing secret and the Temporal address, and a
 * trainer or recognizer runs code and models that came from users.
 *
 * An allowlist, so a secret added to Gantry's configuration later is not
 * passed on by default.
 */

/** Variables passed through by exact name. */
const PASSED = new Set([
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'TZ',
  'TMPDIR',
  'LD_LIBRARY_PATH',
  'VIRTUAL_ENV',
]);

/** Variables passed through by prefix: locale, Python, the numeric and accelerator runtimes, model caches. */
const PASSED_PREFIXES = [
  'LC_',
  'PYTHON',
  'JAX_',
  'XLA_',
  'CUDA_',
  'NVIDIA_',
  'NCCL_',
  'TORCH_',
  'OMP_',
  'MKL_',
  'OPENBLAS_',
  'HF_',
  'TRANSFORMERS_',
];

/** What a child process of Gantry may see of this process's environment, plus `extra`. */
export function subprocessEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined) continue;
    if (PASSED.has(name) || PASSED_PREFIXES.some((p) => name.startsWith(p))) env[name] = value;
  }
  for (const [name, value] of Object.entries(extra)) if (value !== undefined) env[name] = value;
  return env;
}
