/**
 * Before an upgrade: replays the history of every open workflow of a running
 * installation against the workflow code of this checkout, and says which
 * would break (a nondeterminism error means the new code would fail that run's
 * next workflow task). Run it with the new code, pointed at the old
 * installation's Temporal:
 *
 *   npm run replay-open-workflows            # TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE, default local
 *
 * Exits 0 when every open run replays, 1 when any does not (each is named),
 * 2 when it could not look.
 */
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { loadConfig } from '../platform/config';
import { temporalConnectionOptions } from '../platform/temporal';
import { workflowSource } from '../workers/workflow-code';

async function main(): Promise<number> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const config = loadConfig();
  const connection = await Connection.connect(temporalConnectionOptions(config.temporal));
  try {
    const client = new Client({ connection, namespace: config.temporal.namespace });
    const histories = client.workflow.list({ query: 'ExecutionStatus = "Running"' }).intoHistories();
    let replayed = 0;
    const broken: string[] = [];
    for await (const result of Worker.runReplayHistories(workflowSource(), histories)) {
      replayed++;
      if (result.error) {
        broken.push(result.workflowId);
        process.stdout.write(`FAIL ${result.workflowId}: ${result.error.message}\n`);
      }
    }
    process.stdout.write(
      `${replayed} open workflow(s) replayed against this code: ${replayed - broken.length} ok, ${broken.length} would break\n`,
    );
    return broken.length ? 1 : 0;
  } finally {
    await connection.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`replay-open-workflows: ${(err as Error).message}\n`);
    process.exit(2);
  },
);
