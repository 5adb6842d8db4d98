/**
 * File validation throughput, and the validating worker's peak memory.
 *
 *   npx tsx bench/file-validation.ts [size-in-GiB, default 1]
 *
 * The file is validated by the real control worker process through the real
 * fileValidation workflow (Temporal dev server, embedded PostgreSQL). The
 * reference, measured in the same run on the same file, is a bare Node loop:
 * readline over the file and JSON.parse on each line. Printed: both times, the
 * ratio (reference time / validation time; target >= 0.6) and the worker's
 * peak RSS during validation (target < 300 MiB).
 */
import { createReadStream, linkSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Client, Connection } from '@temporalio/client';
import { fileValidationWorkflowId } from '../common/files';
import { createApiKey, createOrganization, createProject } from '../db/accounts';
import { insertFile } from '../db/files';
import { createPool } from '../db/pool';
import { startEphemeralServices } from '../scripts/lib/ephemeral-services';
import { writeWorkflowBundle } from '../workers/runtime';
import { CONTROL_TASK_QUEUE } from '../workers/task-queues';
import { startProcess } from '../test/helpers/processes';
import { procStatus, resetPeakRss, writeConversationalJsonl } from './lib/datasets';

const say = (s: string) => process.stderr.write(`[bench] ${s}\n`);

async function bareLoop(file: string): Promise<number> {
  const t0 = performance.now();
  let n = 0;
  const rl = createInterface({ input: createReadStream(file, { highWaterMark: 1 << 20 }), crlfDelay: Infinity });
  for await (const line of rl) {
    JSON.parse(line);
    n++;
  }
  if (n === 0) throw new Error('no lines');
  return (performance.now() - t0) / 1000;
}

async function main() {
  const gib = Number(process.argv[2] ?? 1);
  const work = mkdtempSync(path.join(tmpdir(), 'gantry-bench-'));
  const services = await startEphemeralServices(work, say);
  let worker: ReturnType<typeof startProcess> | undefined;
  try {
    const dataDir = path.join(work, 'data');
    const file = path.join(work, 'train.jsonl');
    say(`generating ${gib} GiB of conversational JSONL...`);
    const lines = await writeConversationalJsonl(file, gib * 2 ** 30);
    const bytes = statSync(file).size;

    // The row and blob the upload route would have made (the blob is a hard link: no copy).
    const db = createPool(services.databaseUrl, 2);
    const org = await createOrganization(db, 'bench');
    const projectId = await createProject(db, { organizationId: org, name: 'bench', slug: `bench-${Date.now()}` });
    await createApiKey(db, { projectId, userId: null, name: 'bench' });
    const fileId = `file-bench-${Date.now()}`;
    const blobKey = `files/${projectId}/${fileId}`;
    mkdirSync(path.join(dataDir, 'blobs', 'files', projectId), { recursive: true });
    linkSync(file, path.join(dataDir, 'blobs', blobKey));
    await insertFile(db, {
      id: fileId,
      projectId,
      filename: 'train.jsonl',
      purpose: 'fine-tune',
      fileType: 'jsonl',
      blobKey,
      stored: { bytes, sha256: 'not-computed-by-bench' },
    });

    const bundle = path.join(work, 'bundle.js');
    await writeWorkflowBundle(bundle, say);
    worker = startProcess('workers/control.ts', {
      DATABASE_URL: services.databaseUrl,
      TEMPORAL_ADDRESS: services.temporalAddress,
      GANTRY_DATA_DIR: dataDir,
      GANTRY_WORKFLOW_BUNDLE: bundle,
    });
    await worker.waitFor(/control worker polling/);
    const pid = worker.child.pid!;

    const ref1 = await bareLoop(file);
    say(`reference (readline + JSON.parse): ${ref1.toFixed(2)} s`);

    const idleRss = procStatus(pid, 'VmRSS');
    resetPeakRss(pid);
    const connection = await Connection.connect({ address: services.temporalAddress });
    const client = new Client({ connection });
    const t0 = performance.now();
    const handle = await client.workflow.start('fileValidation', {
      workflowId: fileValidationWorkflowId(fileId),
      taskQueue: CONTROL_TASK_QUEUE,
      args: [{ fileId, projectId, purpose: 'fine-tune', heartbeatTimeoutSeconds: 30 }],
    });
    const report = await handle.result();
    const workflowSeconds = (performance.now() - t0) / 1000;
    const peakRss = procStatus(pid, 'VmHWM');
    const history = await handle.fetchHistory();
    const ts = (e: any) => Number(e.eventTime.seconds) + e.eventTime.nanos / 1e9;
    const scheduled = history.events!.find(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'validateFile',
    )!;
    const ofValidation = (x?: { scheduledEventId?: unknown } | null) =>
      String(x?.scheduledEventId) === String(scheduled.eventId);
    const started = history.events!.find((e) => ofValidation(e.activityTaskStartedEventAttributes));
    const completed = history.events!.find((e) => ofValidation(e.activityTaskCompletedEventAttributes));
    const activitySeconds = ts(completed) - ts(started);
    await connection.close();
    await db.end();

    const ref2 = await bareLoop(file);
    say(`reference again: ${ref2.toFixed(2)} s`);
    const reference = (ref1 + ref2) / 2;
    const result = {
      file_bytes: bytes,
      lines,
      valid: (report as { valid: boolean }).valid,
      reference_seconds: [Number(ref1.toFixed(3)), Number(ref2.toFixed(3))],
      validation_activity_seconds: Number(activitySeconds.toFixed(3)),
      workflow_end_to_end_seconds: Number(workflowSeconds.toFixed(3)),
      ratio_activity: Number((reference / activitySeconds).toFixed(3)),
      ratio_end_to_end: Number((reference / workflowSeconds).toFixed(3)),
      validation_mb_per_s: Number((bytes / 2 ** 20 / activitySeconds).toFixed(1)),
      worker_idle_rss_mib: Number(idleRss.toFixed(1)),
      worker_peak_rss_during_validation_mib: Number(peakRss.toFixed(1)),
      targets: { ratio: '>= 0.6', peak_rss_mib: '< 300' },
    };
    process.stdout.write(JSON.stringify(result, null, 2) + '\n');
  } finally {
    if (worker && worker.child.exitCode === null) {
      worker.child.kill('SIGTERM');
      await worker.exited;
    }
    await services.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
