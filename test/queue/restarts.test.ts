/**
 * The API restarted in the middle of a stream of jobs: the API runs as its own
 * process, three workers (the worker library) claim and complete jobs through
 * it, and the process is killed (SIGKILL) and started again while they work.
 * Every job ends done exactly once: none is lost, none is completed twice, and
 * each one's outputs are its own.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { newId } from '../../platform/ids';
import { insertDeployment } from '../../db/deployments';
import { freePort } from '../../platform/ports';
import { QueueWorker } from '../../worker-kit/queue-worker';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { startProcess, type StartedProcess } from '../helpers/processes';
import { createTenant, type Tenant } from '../helpers/tenants';

const JOBS = 40;
let p: TestPlatform;
let t: Tenant;
let api: StartedProcess | undefined;

before(async () => {
  p = await startTestPlatform();
  t = await createTenant(p.db);
});
after(async () => {
  if (api && api.child.exitCode === null) api.child.kill('SIGKILL');
  await p.stop();
});

async function startApi(port: number) {
  const started = startProcess('api/server.ts', { GANTRY_API_PORT: String(port) });
  await started.waitFor(/API listening/);
  return started;
}

describe('queue: the API restarted mid-stream', () => {
  test('every job is completed exactly once across a SIGKILL and restart of the API', async () => {
    const port = await freePort();
    const baseUrl = `http://127.0.0.1:${port}`;
    api = await startApi(port);
    const model = `restart-${newId('d').slice(2, 10)}`;
    await insertDeployment(p.db, { id: newId('dep'), projectId: t.projectId, name: model });

    const ids: string[] = [];
    for (let i = 0; i < JOBS; i++) {
      const res = await call(baseUrl, 'POST', '/v1/queue/submit', { key: t.key, json: { model, payload: { i } } });
      assert.equal(res.status, 200);
      ids.push(res.body.request_id);
    }

    const handled = new Map<string, number>();
    const workers = [1, 2, 3].map(
      (n) =>
        new QueueWorker({ baseUrl, apiKey: t.key, model, workerId: `w${n}`, claimTimeoutSeconds: 2, waitSeconds: 1 }),
    );
    const running = workers.map((w) =>
      w.run(async (job) => {
        await new Promise((r) => setTimeout(r, 60));
        handled.set(job.request_id, (handled.get(job.request_id) ?? 0) + 1);
        return { i: job.payload.i as number };
      }),
    );
    const doneCount = async () =>
      Number(
        (await p.db.query(`SELECT count(*) FROM queue_jobs WHERE id = ANY($1) AND status = 'done'`, [ids])).rows[0]
          .count,
      );

    await eventually(doneCount, (n) => n >= 8, 30_000);
    api.child.kill('SIGKILL');
    await api.exited;
    const doneAtCrash = await doneCount();
    await new Promise((r) => setTimeout(r, 1000));
    api = await startApi(port);
    await eventually(doneCount, (n) => n === JOBS, 60_000);
    for (const w of workers) w.stop();
    await Promise.all(running);

    assert.ok(doneAtCrash < JOBS, `the crash came mid-stream (${doneAtCrash} of ${JOBS} done)`);
    const { rows } = await p.db.query(
      `SELECT id, status, payload, outputs, history FROM queue_jobs WHERE id = ANY($1)`,
      [ids],
    );
    assert.equal(rows.length, JOBS, 'no job lost');
    for (const r of rows) {
      assert.equal(r.status, 'done');
      assert.deepEqual(r.outputs, { i: r.payload.i }, 'its own outputs');
      const completions = r.history.filter((h: { status: string }) => h.status === 'done').length;
      assert.equal(completions, 1, `${r.id} completed once`);
    }
    assert.ok([...handled.keys()].length === JOBS, 'every job reached a handler');
  });
});
