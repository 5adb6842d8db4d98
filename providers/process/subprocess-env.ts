/**
 * The environment Gantry gives the programs it runs (trainers, the speech
 * tools, ffmpeg, zstd): what they inherit (platform/config.ts's allowlist, none
 * of Gantry's own settings), plus what the caller sets.
 */
import { inheritedEnvironment } from '../../platform/config';

/** What a child process of Gantry may see of this process's environment, plus `extra`. */
export function subprocessEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env = inheritedEnvironment();
  for (const [name, value] of Object.entries(extra)) if (value !== undefined) env[name] = value;
  return env;
}
