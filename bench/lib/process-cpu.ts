/**
 * CPU time a process has used (user + system, its threads together), from /proc. A bench that
 * shares its machine with other work reads throughput through that work's noise (a neighbour's
 * load moved one round's ratio by half); the CPU a server spends per request is far steadier,
 * so the queue and gateway benches show it beside their judged throughput ratios.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

let ticksPerSecond: number | undefined;

/** Seconds of CPU process `pid` has used so far. */
export function cpuSeconds(pid: number): number {
  ticksPerSecond ??= Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces, so it is skipped by its closing paren):
  // state is field 3, utime field 14, stime field 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}

/** Runs `work` and answers its result with the CPU microseconds `pid` used per `count` during it. */
export async function cpuPer<T>(
  pid: number,
  count: number,
  work: () => Promise<T>,
): Promise<{ result: T; cpuMicroseconds: number }> {
  const before = cpuSeconds(pid);
  const result = await work();
  return { result, cpuMicroseconds: Math.round(((cpuSeconds(pid) - before) * 1e6) / count) };
}

/**
 * Milliseconds process `pid`'s main thread (a Node process's event loop) has spent ready to run but
 * waiting for a CPU, from /proc/<pid>/schedstat: on a machine shared with other work, what a
 * request through that process waits for beyond its own CPU.
 */
export function runQueueWaitMs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
}
