/** Gantry's real process entry points, started as child processes with their JSON logs captured. */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { freePort } from '../../platform/ports';
import { NODE_TYPESCRIPT_ARGS } from '../../platform/node-typescript';

const ROOT = path.resolve(__dirname, '../..');

export type StartedProcess = ReturnType<typeof startProcess>;

export function startProcess(entry: string, env: Record<string, string>, nodeArgs: string[] = []) {
  const child = spawn(process.execPath, [...nodeArgs, ...NODE_TYPESCRIPT_ARGS, path.join(ROOT, entry)], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Array<Record<string, unknown>> = [];
  let buffered = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      try {
        lines.push(JSON.parse(line));
      } catch {
        lines.push({ msg: line });
      }
    }
  });
  child.stderr!.on('data', (chunk: Buffer) => lines.push({ msg: chunk.toString('utf8') }));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const waitFor = async (pattern: RegExp, timeoutMs = 60_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!lines.some((l) => pattern.test(String(l.msg)))) {
      if (child.exitCode !== null) throw new Error(`${entry} exited early:\n${lines.map((l) => l.msg).join('\n')}`);
      if (Date.now() > deadline) throw new Error(`${entry}: no log line matching ${pattern}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  return { child, lines, exited, waitFor };
}

/**
 * The API process (api/server.ts) listening on a free port, and its URL. A port found free may be
 * taken before the API binds it, seconds later on a loaded machine (by any socket of a file
 * running beside this one, an outgoing connection's included): the API then exits with
 * EADDRINUSE, and is started again on another port.
 */
export async function startApiProcess(env: Record<string, string> = {}) {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const api = startProcess('api/server.ts', { ...env, GANTRY_API_PORT: String(port) });
    try {
      await api.waitFor(/API listening/);
      return { api, url: `http://127.0.0.1:${port}` };
    } catch (err) {
      if (api.child.exitCode === null) api.child.kill('SIGKILL');
      const portTaken = api.lines.some((l) => String(l.msg).includes('EADDRINUSE'));
      if (!portTaken || attempt === 3) throw err;
    }
  }
}
