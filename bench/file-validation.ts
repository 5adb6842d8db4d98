/**
 * File validation throughput, and the validating worker's peak memory.
 *
 *   npx tsx bench/file-validation.ts [size-in-GiB, default 1]
 *
 * The file is validated by the real control worker process through the real
 * fileValidation workflow (Temporal dev server, embedded PostgreSQL), a new
 * file row over the same bytes each round. The reference, in interleaved rounds
 * on the same file (bench/lib/rounds.ts), is a bare Node loop: readline over the
 * file and JSON.parse on each line. Judged: reference time / validation activity
 * time, and the worker's peak RSS during a validation.
 */
import { createReadStream, linkSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Client, Connection } from '@temporalio/client';
import { fileValidationWorkflowId } from '../shared/files';
import { createApiKey, createOrganization, createProject } from '../db/accounts';
import { insertFile } from '../db/files';
import { createPool } from '../db/pool';
import { startEphemeralServices } from '../scripts/lib/ephemeral-services';
import { writeWorkflowBundle } from '../workers/workflow-code';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';
import { startProcess } from '../test/helpers/processes';
import { procStatus, resetPeakRss, writeConversationalJsonl } from './lib/datasets';
import { benchNodeArgs, runBench } from './lib/platform';
import { compareInRounds } from './lib/rounds';

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

    const db = createPool(services.databaseUrl, 2);
    const org = await createOrganization(db, 'bench');
    const projectId = await createProject(db, { organizationId: org, name: 'bench', slug: `bench-${Date.now()}` });
    await createApiKey(db, { projectId, userId: null, name: 'bench' });
    mkdirSync(path.join(dataDir, 'blobs', 'files', projectId), { recursive: true });

    const bundle = path.join(work, 'bundle.js');
    await writeWorkflowBundle(bundle, say);
    worker = startProcess(
      'workers/control.ts',
      {
        DATABASE_URL: services.databaseUrl,
        TEMPORAL_ADDRESS: services.temporalAddress,
        GANTRY_DATA_DIR: dataDir,
        GANTRY_WORKFLOW_BUNDLE: bundle,
      },
      benchNodeArgs(),
    );
    await worker.waitFor(/control worker polling/);
    const pid = worker.child.pid!;
    const connection = await Connection.connect({ address: services.temporalAddress });
    const client = new Client({ connection });
    say(
      `${lines} lines, ${(bytes / 2 ** 20).toFixed(0)} MiB; worker idle RSS ${procStatus(pid, 'VmRSS').toFixed(0)} MiB`,
    );

    /** Validates the file as a new upload (the row and blob the upload route would make; the blob a hard link). */
    const validate = async () => {
      const fileId = `file-bench-${Date.now()}`;
      const blobKey = `files/${projectId}/${fileId}`;
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
      resetPeakRss(pid);
      const t0 = performance.now();
      const handle = await client.workflow.start('fileValidation', {
        workflowId: fileValidationWorkflowId(fileId),
        taskQueue: CONTROL_TASK_QUEUE,
        args: [{ fileId, projectId, purpose: 'fine-tune', heartbeatTimeoutSeconds: 30 }],
      });
      const report = (await handle.result()) as { valid: boolean };
      if (!report.valid) throw new Error(`the bench's file did not validate: ${JSON.stringify(report)}`);
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
      return { activity_s: ts(completed) - ts(started), workflow_s: workflowSeconds, peak_rss_mib: peakRss };
    };
    try {
      await compareInRounds({
        bench: 'file-validation',
        reference: async () => ({ seconds: await bareLoop(file) }),
        gantry: validate,
        checks: [
          {
            name: 'throughput, validation activity / readline + JSON.parse',
            value: (r, g) => r.seconds / g.activity_s,
            atLeast: 0.9,
          },
          { name: 'worker peak RSS during a validation', value: (_r, g) => g.peak_rss_mib, atMost: 256, unit: 'MiB' },
        ],
      });
    } finally {
      await connection.close();
      await db.end();
    }
  } finally {
    if (worker && worker.child.exitCode === null) {
      worker.child.kill('SIGTERM');
      await worker.exited;
    }
    await services.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

runBench(main);
