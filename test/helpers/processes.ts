/** Gantry's real process entry points, started as child processes with their JSON logs captured. */
import { spawn } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');

export type StartedProcess = ReturnType<typeof startProcess>;

export function startProcess(entry: string, env: Record<string, string>, nodeArgs: string[] = []) {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', path.join(ROOT, entry)], {
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
