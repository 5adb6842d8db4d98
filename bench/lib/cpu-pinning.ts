/**
 * Pinning a bench's processes to CPUs with util-linux's `taskset`, to stand for two machines on
 * one: in production a model server runs on its GPU host and the gateway on the control plane, so
 * neither takes CPU from the other. On a shared 2-core machine torch's threads would otherwise
 * keep both cores busy while the gateway waits for one (bench/model-server.ts).
 */
import { spawnSync } from 'node:child_process';
import { cpus } from 'node:os';

export interface CpuSplit {
  /** The cores of the model's machine: the model server and the reference's bare loop. */
  model: string;
  /** The cores of the control plane's machine: the gateway and the bench's own process and clients. */
  host: string;
}

/**
 * The last core for the model, the others for the host; undefined where that cannot be done (one
 * core, or no util-linux `taskset` or iproute2 `ss` to pin with and find the replica by).
 */
export function modelAndHostCpus(): CpuSplit | undefined {
  const n = cpus().length;
  const has = (tool: string) => spawnSync(tool, ['-V'], { stdio: 'ignore' }).status === 0;
  if (n < 2 || !has('taskset') || !has('ss')) return undefined;
  return { model: String(n - 1), host: n === 2 ? '0' : `0-${n - 2}` };
}

/**
 * Pins every thread of process `pid` to `cpuList` (its later threads and children inherit it).
 * Tried again when it fails: a thread that ends while taskset walks the process's threads fails it.
 */
export function pinProcess(pid: number, cpuList: string): void {
  for (let attempt = 1; ; attempt++) {
    const r = spawnSync('taskset', ['-a', '-p', '-c', cpuList, String(pid)], { encoding: 'utf8' });
    if (r.status === 0) return;
    if (attempt === 10) throw new Error(`taskset -a -p -c ${cpuList} ${pid}: ${r.stderr || r.error?.message}`);
  }
}

/** The CPUs process `pid` may run on, as /proc shows them (e.g. `1`). */
export function allowedCpus(pid: number): string {
  const r = spawnSync('taskset', ['-c', '-p', String(pid)], { encoding: 'utf8' });
  return r.stdout.trim().split(': ').at(-1) ?? '?';
}

/** The process listening on TCP `port` of this host (iproute2's `ss`), e.g. a replica the platform started. */
export function listenerPid(port: number): number {
  const r = spawnSync('ss', ['-ltnpH', `sport = :${port}`], { encoding: 'utf8' });
  const pid = /pid=(\d+)/.exec(r.stdout ?? '')?.[1];
  if (!pid)
    throw new Error(`no process found listening on port ${port} (ss: ${r.stderr || r.error?.message || 'nothing'})`);
  return Number(pid);
}
