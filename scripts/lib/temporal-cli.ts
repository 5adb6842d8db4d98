/**
 * Finds the Temporal CLI: TEMPORAL_CLI, else `temporal` on the PATH, else a
 * copy built once with `go install` into a per-user cache and reused after.
 * Never substitutes anything that is not Temporal: without Go or a CLI it
 * stops and says what to install.
 */
import { spawn } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';

export const TEMPORAL_CLI_VERSION = 'v1.5.1';
const MODULE = 'github.com/temporalio/cli/cmd/temporal';

export function temporalCliCacheDir(): string {
  const base = process.env.XDG_CACHE_HOME || path.join(homedir(), '.cache');
  return path.join(base, 'gantry', `temporal-cli-${TEMPORAL_CLI_VERSION}`);
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/** The first executable named `cmd` on the PATH (what `command -v` answers, without a shell). */
function onPath(cmd: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, cmd);
    if (isExecutable(candidate)) return candidate;
  }
  return null;
}

export async function ensureTemporalCli(opts: { configured?: string; log: (line: string) => void }): Promise<string> {
  if (opts.configured) {
    if (!isExecutable(opts.configured)) {
      throw new Error(`TEMPORAL_CLI=${opts.configured} is not an executable file.`);
    }
    return opts.configured;
  }
  const fromPath = onPath('temporal');
  if (fromPath) return fromPath;

  const dir = temporalCliCacheDir();
  const cached = path.join(dir, 'temporal');
  if (isExecutable(cached)) return cached;

  const go = onPath('go');
  if (!go) {
    throw new Error(
      `The Temporal CLI ${TEMPORAL_CLI_VERSION} is needed and was not found. Either install Go (1.23 or later) so it can be ` +
        `built with \`go install ${MODULE}@${TEMPORAL_CLI_VERSION}\`, or install the Temporal CLI and set TEMPORAL_CLI=/path/to/temporal.`,
    );
  }
  mkdirSync(dir, { recursive: true });
  opts.log(
    `Building Temporal CLI ${TEMPORAL_CLI_VERSION} with go install into ${dir} (first run only; a few minutes)...`,
  );
  const started = Date.now();
  await new Promise<void>((resolve, reject) => {
    const child = spawn(go, ['install', `${MODULE}@${TEMPORAL_CLI_VERSION}`], {
      env: { ...process.env, GOBIN: dir, GOFLAGS: [process.env.GOFLAGS, '-buildvcs=false'].filter(Boolean).join(' ') },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`go install ${MODULE}@${TEMPORAL_CLI_VERSION} failed (exit ${code}).`)),
    );
  });
  if (!existsSync(cached)) throw new Error(`go install finished but ${cached} is missing.`);
  opts.log(`Temporal CLI built in ${Math.round((Date.now() - started) / 1000)}s.`);
  return cached;
}
