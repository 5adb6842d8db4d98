/**
 * Batches: a batch of chat requests against a dedicated endpoint (the reference byte model, one
 * replica), against the same requests sent by a bare client straight to the replica at the same
 * concurrency.
 *
 *   npx tsx bench/batches.ts [lines per measurement, default 1000]
 *
 * In interleaved rounds (bench/lib/rounds.ts):
 *   - reference: `fetch` from this process to the replica's own address, CONCURRENCY requests in
 *     flight, until every line has its answer; lines per second;
 *   - Gantry: the same lines as a batch (`POST /v1/batches`, the file uploaded first, not timed),
 *     from the create to the batch's COMPLETED as `GET /v1/batches/{id}` shows it (polled every
 *     50 ms): validation, the slices through the gateway with the batch's credential, each answer
 *     recorded, the output file written. Lines per second.
 * Judged: Gantry / reference ≥ 0.9.
 */
import { randomBytes } from 'node:crypto';
import { runningReplicaOrigins } from '../db/deployments';
import { call } from '../test/helpers/platform';
import { readyReferenceEndpoint, uploadBatchInput } from '../test/helpers/reference-endpoint';
import { createTenant } from '../test/helpers/tenants';
import { runBench, UNTRIPPABLE_RATE_LIMITS, withBenchPlatform } from './lib/platform';
import { compareInRounds } from './lib/rounds';

const say = (s: string) => process.stderr.write(`[bench] ${s}\n`);
const LINES = Number(process.argv[2] ?? 1000);
const CONCURRENCY = 8;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main() {
  await withBenchPlatform(
    say,
    {
      env: {
        ...UNTRIPPABLE_RATE_LIMITS,
        GANTRY_BATCH_CONCURRENCY_PER_PROJECT: String(CONCURRENCY),
        // The worker signs its batches' credentials; a bench installation gets a secret of its own.
        GANTRY_SIGNING_SECRET: process.env.GANTRY_SIGNING_SECRET ?? randomBytes(32).toString('hex'),
      },
    },
    async (p) => {
      const tenant = await createTenant(p.db);
      const model = await readyReferenceEndpoint(p, tenant, 'bench');
      const { rows } = await p.db.query<{ container_deployment_id: string }>(
        `SELECT ed.container_deployment_id FROM endpoint_deployments ed JOIN endpoints e ON e.id = ed.endpoint_id
          WHERE e.project_id = $1`,
        [tenant.projectId],
      );
      const [replica] = await runningReplicaOrigins(p.db, rows[0].container_deployment_id);
      const bodies = Array.from({ length: LINES }, (_, i) => ({
        model,
        messages: [{ role: 'user', content: `Say something about the number ${i}.` }],
        max_tokens: 16,
        temperature: 0,
      }));
      const lines = bodies.map((body, i) => ({ custom_id: `line-${i}`, body }));

      async function bare() {
        const started = performance.now();
        let next = 0;
        const lane = async () => {
          while (next < bodies.length) {
            const res = await fetch(`${replica}/v1/chat/completions`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify(bodies[next++]),
            });
            if (res.status !== 200) throw new Error(`the replica answered ${res.status}`);
            await res.text();
          }
        };
        await Promise.all(Array.from({ length: CONCURRENCY }, lane));
        return { lines_per_second: LINES / ((performance.now() - started) / 1000) };
      }

      async function batch() {
        const input = await uploadBatchInput(p, tenant.key, lines);
        const started = performance.now();
        const created = await call(p.baseUrl, 'POST', '/v1/batches', {
          key: tenant.key,
          json: { endpoint: '/v1/chat/completions', input_file_id: input },
        });
        if (created.status !== 200) throw new Error(JSON.stringify(created.body));
        for (;;) {
          const b = (await call(p.baseUrl, 'GET', `/v1/batches/${created.body.job.id}`, { key: tenant.key })).body;
          if (b.status === 'COMPLETED') break;
          if (b.status !== 'VALIDATING' && b.status !== 'IN_PROGRESS') throw new Error(JSON.stringify(b));
          await sleep(50);
        }
        return { lines_per_second: LINES / ((performance.now() - started) / 1000) };
      }

      say(`${LINES} chat lines of 16 tokens, ${CONCURRENCY} in flight, one replica of the reference byte model`);
      await compareInRounds({
        bench: 'batches',
        reference: bare,
        gantry: batch,
        checks: [
          {
            name: 'batch lines per second / bare client to the replica',
            value: (r, g) => g.lines_per_second / r.lines_per_second,
            atLeast: 0.9,
          },
        ],
      });
    },
  );
}

runBench(main);
