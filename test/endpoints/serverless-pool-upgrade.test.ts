/**
 * An API that starts after an upgrade changed a serverless pool's spec sends the pool its new spec,
 * and does not wait for the answer before it serves: the answer comes from the deployment's
 * worker, which may start later or be down. (It waited for the Update's whole deadline, and an
 * API started beside a pool no worker served took 30 s to listen.)
 *
 * The pool is made by a platform with its workers, which then stop; the real API process
 * (api/server.ts) starts with another GANTRY_SERVERLESS_MAX_REPLICAS, so the pool's spec is not
 * the one it computes.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import { loadConfig } from '../../platform/config';
import { temporalConnectionOptions } from '../../platform/temporal';
import { endOpenRuns, startTestPlatform } from '../helpers/platform';
import { startApiProcess, type StartedProcess } from '../helpers/processes';

let api: StartedProcess | undefined;
after(async () => {
  if (api && api.child.exitCode === null) api.child.kill('SIGKILL');
  // The pool's run the API resumed: nobody here serves it, and the lane's next file must not find it.
  const config = loadConfig();
  const connection = await Connection.connect(temporalConnectionOptions(config.temporal));
  await endOpenRuns(new Client({ connection, namespace: config.temporal.namespace }));
  await connection.close();
});

test('an API started after a pool’s spec changed listens before the pool answers its new spec', async () => {
  const made = await startTestPlatform({ serverless: true, env: { GANTRY_SERVERLESS_MAX_REPLICAS: '2' } });
  await made.stop(); // no worker serves the pool from here on

  ({ api } = await startApiProcess({ GANTRY_SERVERLESS_MAX_REPLICAS: '3' }));
  await api.waitFor(/serverless pool not brought to the current spec/);
  const said = api.lines.map((l) => String(l.msg));
  assert.ok(
    said.indexOf('API listening') < said.findIndex((m) => m.startsWith('serverless pool not brought')),
    `the API listened before the Update's answer: ${JSON.stringify(said)}`,
  );
  assert.ok(!said.includes('serverless pools not made'), JSON.stringify(said));
});
