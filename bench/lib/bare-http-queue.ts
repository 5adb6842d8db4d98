/**
 * The leanest HTTP front a queue could have: `http.createServer` over a pg pool, the bench's
 * bare table behind three routes (POST /submit, /claim, /done, JSON bodies), nothing else: no
 * authentication, validation, limits, logs, metrics or workflows. The queue bench's second
 * reference: what putting HTTP in front of the same statements costs on this machine, so the gap
 * between Gantry and the bare table splits into HTTP's share and Gantry's own.
 *
 * With BARE_QUEUE_GROUP_SUBMITS=1, submits that arrive while an INSERT is in flight wait for it
 * and then go in as one multi-row INSERT (group commit): the most a one-job-per-request HTTP
 * queue could make of the database, shown beside the plain front, not judged.
 *
 *   BARE_QUEUE_PORT=<port> DATABASE_URL=<url> node --require tsx/cjs bench/lib/bare-http-queue.ts
 */
import { createServer, type IncomingMessage } from 'node:http';
import pg from 'pg';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 16 });

async function body(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return chunks.length ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>) : {};
}

interface WaitingSubmit {
  payload: unknown;
  resolve: (id: string) => void;
  reject: (err: Error) => void;
}
let waiting: WaitingSubmit[] = [];
let inserting = false;

/** One INSERT at a time; the submits that came meanwhile go in together, in arrival order. */
function insertWaiting(): void {
  if (inserting || !waiting.length) return;
  const batch = waiting;
  waiting = [];
  inserting = true;
  pool
    .query<{ id: string }>(
      `INSERT INTO bare_queue (priority, payload, status)
       SELECT 0, p, 'pending' FROM unnest($1::jsonb[]) WITH ORDINALITY AS t(p, n) ORDER BY n RETURNING id`,
      [batch.map((s) => JSON.stringify(s.payload))],
    )
    .then(
      ({ rows }) => {
        // bigserial ids are drawn in the SELECT's order; RETURNING's own order is not promised.
        const ids = rows.map((r) => BigInt(r.id)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
        batch.forEach((s, i) => s.resolve(String(ids[i])));
      },
      (err: Error) => batch.forEach((s) => s.reject(err)),
    )
    .finally(() => {
      inserting = false;
      insertWaiting();
    });
}

const groupSubmits = process.env.BARE_QUEUE_GROUP_SUBMITS === '1';

const routes: Record<string, (b: Record<string, unknown>) => Promise<unknown>> = {
  async '/submit'(b) {
    if (groupSubmits) {
      const id = await new Promise<string>((resolve, reject) => {
        waiting.push({ payload: b.payload ?? {}, resolve, reject });
        insertWaiting();
      });
      return { id };
    }
    const { rows } = await pool.query(
      `INSERT INTO bare_queue (priority, payload, status) VALUES (0, $1, 'pending') RETURNING id`,
      [b.payload ?? {}],
    );
    return { id: rows[0].id };
  },
  async '/claim'() {
    const { rows } = await pool.query(
      `UPDATE bare_queue SET status = 'running', claimed_at = clock_timestamp()
        WHERE id = (SELECT id FROM bare_queue WHERE status = 'pending' ORDER BY priority DESC, id
                     FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id`,
    );
    return { id: rows[0]?.id ?? null };
  },
  async '/done'(b) {
    await pool.query(`UPDATE bare_queue SET status = 'done', done_at = clock_timestamp() WHERE id = $1`, [b.id]);
    return {};
  },
};

createServer((req, res) => {
  const route = routes[req.url ?? ''];
  if (!route || req.method !== 'POST') return void res.writeHead(404).end();
  body(req)
    .then(route)
    .then(
      (answer) => {
        const text = JSON.stringify(answer);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
      },
      (err: Error) => res.writeHead(500).end(err.message),
    );
}).listen(Number(process.env.BARE_QUEUE_PORT), '127.0.0.1');
