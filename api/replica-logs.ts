/**
 * Replicas' output for the logs route: the tail of each replica's log file, and
 * with `follow` a stream of new lines as they are written (NDJSON, one
 * `{replica_id, line}` object per line) until the client goes away or the
 * deployment does. Log files are written by this host's container runtime
 * (process or podman); a Kubernetes runtime would read the pod log API instead (KUBERNETES.md).
 */
import { closeSync, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import type { Request, Response } from 'express';
import { TAIL_BYTES, tailLines } from '../providers/containers/log-tail';

const POLL_MS = 250;

/** Bytes appended since `offset`, as complete lines; the new offset stops after the last newline. */
function readNew(file: string, offset: number): { lines: string[]; offset: number } {
  if (!existsSync(file)) return { lines: [], offset };
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    if (size <= offset) return { lines: [], offset };
    const buf = Buffer.alloc(Math.min(size - offset, TAIL_BYTES));
    readSync(fd, buf, 0, buf.length, offset);
    const end = buf.lastIndexOf(0x0a);
    if (end < 0) return { lines: [], offset };
    const lines = buf.subarray(0, end).toString('utf8').split('\n').filter(Boolean);
    return { lines, offset: offset + end + 1 };
  } finally {
    closeSync(fd);
  }
}

export interface LogSource {
  replicaId: string;
  file: string;
}

/**
 * Streams the tails, then new lines, of the replicas `sources` names (asked
 * again each round, so replicas started later join the stream).
 */
export async function followLogs(
  req: Request,
  res: Response,
  opts: { sources: () => Promise<LogSource[] | null>; tail: number },
): Promise<void> {
  res.status(200).setHeader('content-type', 'application/x-ndjson');
  res.setHeader('cache-control', 'no-store');
  res.flushHeaders();
  let closed = false;
  req.on('close', () => (closed = true));
  const offsets = new Map<string, number>();
  const send = (replicaId: string, lines: string[]) => {
    for (const line of lines) res.write(JSON.stringify({ replica_id: replicaId, line }) + '\n');
  };
  while (!closed) {
    const sources = await opts.sources();
    if (!sources) break; // the deployment is gone
    for (const s of sources) {
      const seen = offsets.get(s.replicaId);
      const next = seen === undefined ? tailLines(s.file, opts.tail) : readNew(s.file, seen);
      send(s.replicaId, next.lines);
      offsets.set(s.replicaId, next.offset);
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  res.end();
}
