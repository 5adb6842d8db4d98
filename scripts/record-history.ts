/**
 * Records a finished workflow's history into test/replay/histories/ so the
 * replay test guards its determinism from then on.
 *
 *   npm run record-history -- <workflowId> [label] [runId]
 *
 * Without a run id the latest run is recorded; an entity workflow that
 * continued as new has earlier runs worth keeping too (name them by run id).
 *
 * Uses TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE (default: the local dev server).
 * The file is named <WorkflowType>-<label>.json; label defaults to the date.
 */
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { loadConfig } from '../platform/config';
import { temporalConnectionOptions } from '../platform/temporal';
import { writeRecordedHistory } from './lib/recorded-histories';

async function main() {
  const [workflowId, label = new Date().toISOString().slice(0, 10), runId] = process.argv.slice(2);
  if (!workflowId) {
    process.stderr.write('usage: npm run record-history -- <workflowId> [label] [runId]\n');
    process.exit(2);
  }
  const config = loadConfig();
  const connection = await Connection.connect(temporalConnectionOptions(config.temporal));
  try {
    const client = new Client({ connection, namespace: config.temporal.namespace });
    const handle = client.workflow.getHandle(workflowId, runId);
    const description = await handle.describe();
    if (description.status.name === 'RUNNING') {
      throw new Error(`${workflowId} is still running; record finished runs so the history is complete.`);
    }
    const history = await handle.fetchHistory();
    const file = writeRecordedHistory(description.type, label, historyToJSON(history));
    if (!file)
      throw new Error(
        `a history named ${description.type}-${label}.json exists; recorded histories are never replaced`,
      );
    process.stdout.write(`wrote ${path.relative(process.cwd(), file)} (${history.events?.length} events)\n`);
  } finally {
    await connection.close();
  }
}

main().catch((err) => {
  process.stderr.write(`record-history: ${(err as Error).message}\n`);
  process.exit(1);
});
