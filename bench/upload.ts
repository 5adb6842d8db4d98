/**
 * Upload throughput through the API over loopback, against copying the same
 * file on disk, measured in the same run.
 *
 *   npx tsx bench/upload.ts [size-in-GiB, default 1]
 *
 * The API runs as its real process (api/server.ts) with a control worker,
 * Temporal and PostgreSQL; the client streams the file from disk as multipart
 * (purpose batch-api, so no validation competes for the CPU) with a plain
 * streaming client like curl's. In interleaved rounds (bench/lib/rounds.ts).
 * Judged: upload throughput / copy throughput.
 */
import { createReadStream, createWriteStream, mkdtempSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createApiKey, createOrganization, createProject } from '../db/accounts';
import { createPool } from '../db/pool';
import { startEphemeralServices } from '../scripts/lib/ephemeral-services';
import { freePort } from '../platform/ports';
import { startProcess } from '../test/helpers/processes';
import { writeWorkflowBundle } from '../workers/workflow-code';
import { streamMultipartUpload, writeConversationalJsonl } from './lib/datasets';
import { runBench } from './lib/platform';
import { compareInRounds } from './lib/rounds';

const say = (s: string) => process.stderr.write(`[bench] ${s}\n`);

async function main() {
  const gib = Number(process.argv[2] ?? 1);
  const work = mkdtempSync(path.join(tmpdir(), 'gantry-bench-'));
  const services = await startEphemeralServices(work, say);
  const children: Array<ReturnType<typeof startProcess>> = [];
  try {
    const file = path.join(work, 'upload.jsonl');
    await writeConversationalJsonl(file, gib * 2 ** 30);
    const bytes = statSync(file).size;

    const db = createPool(services.databaseUrl, 2);
    const org = await createOrganization(db, 'bench');
    const projectId = await createProject(db, { organizationId: org, name: 'bench', slug: `bench-${Date.now()}` });
    const { secret } = await createApiKey(db, { projectId, userId: null, name: 'bench' });
    await db.end();

    const bundle = path.join(work, 'bundle.js');
    await writeWorkflowBundle(bundle, say);
    const port = await freePort();
    const env = {
      DATABASE_URL: services.databaseUrl,
      TEMPORAL_ADDRESS: services.temporalAddress,
      GANTRY_DATA_DIR: path.join(work, 'data'),
      GANTRY_WORKFLOW_BUNDLE: bundle,
      GANTRY_API_PORT: String(port),
      LOG_LEVEL: 'warn',
    };
    const api = startProcess('api/server.ts', { ...env, LOG_LEVEL: 'info' });
    const worker = startProcess('workers/control.ts', { ...env, LOG_LEVEL: 'info' });
    children.push(api, worker);
    await Promise.all([api.waitFor(/API listening/), worker.waitFor(/control worker polling/)]);

    let round = 0;
    await compareInRounds({
      bench: 'upload',
      reference: async () => {
        const target = path.join(work, `copy-${round}`);
        const t0 = performance.now();
        await pipeline(createReadStream(file, { highWaterMark: 1 << 20 }), createWriteStream(target));
        const seconds = (performance.now() - t0) / 1000;
        unlinkSync(target);
        return { mib_per_s: bytes / 2 ** 20 / seconds };
      },
      gantry: async () => {
        round++;
        const t0 = performance.now();
        const res = await streamMultipartUpload(
          `http://127.0.0.1:${port}/v1/files/upload`,
          secret,
          { purpose: 'batch-api', file_name: 'upload.jsonl' },
          file,
        );
        const seconds = (performance.now() - t0) / 1000;
        const json = JSON.parse(res.body) as { bytes?: number };
        if (res.status !== 200 || json.bytes !== bytes) throw new Error(`upload failed: ${res.status} ${res.body}`);
        return { mib_per_s: bytes / 2 ** 20 / seconds };
      },
      checks: [{ name: 'throughput, upload / copy on disk', value: (r, g) => g.mib_per_s / r.mib_per_s, atLeast: 0.5 }],
    });
  } finally {
    for (const c of children) if (c.child.exitCode === null) c.child.kill('SIGTERM');
    await Promise.all(children.map((c) => c.exited));
    await services.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

runBench(main);
