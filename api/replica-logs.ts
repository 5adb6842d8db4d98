/**
 * Replicas' output for the logs route: the tail of each replica's log file, and
 * with `follow` a stream of new lines as they are written (NDJSON, one
 * `{replica_id, line}` object per line) until the client goes away or the
 * deployment does. Log files are written by this host's container runtime
 * (process or podman); a Kubernetes runtime would read the pod log API instead (KUBERNETES.md).
 */
import type { Request, Response } from 'express';
import { linesSince, tailLines, type LogPosition } from '../providers/containers/log-tail';

const POLL_MS = 250;
/** Which replicas to follow is a database query: asked every this many rounds, not every round. */
const SOURCES_EVERY_ROUNDS = 8;

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
  const positions = new Map<string, LogPosition>();
  const send = (replicaId: string, lines: string[]) => {
    // `lines` as well: a follower reads each NDJSON line as it reads the non-following answer.
    for (const line of lines) res.write(JSON.stringify({ replica_id: replicaId, line, lines: [line] }) + '\n');
  };
  let sources: LogSource[] | null = [];
  for (let round = 0; !closed; round++) {
    if (round % SOURCES_EVERY_ROUNDS === 0) sources = await opts.sources();
    if (!sources) break; // the deployment is gone
    for (const s of sources) {
      const seen = positions.get(s.replicaId);
      const next = seen === undefined ? await tailLines(s.file, opts.tail) : await linesSince(s.file, seen);
      send(s.replicaId, next.lines);
      positions.set(s.replicaId, next.position);
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  res.end();
}
