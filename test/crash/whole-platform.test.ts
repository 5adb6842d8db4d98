/**
 * The control plane loses power (issue 44). The platform runs as `./dev up` runs it (its own
 * Temporal on a SQLite file, its own PostgreSQL, API, gateway and workers, podman replicas), with
 * long-running work of each kind in flight at once (a fine-tune past a checkpoint, a cluster coming
 * up, a file validating, queue jobs pending and claimed, a deployment serving, a deployment rolling
 * to a new image mid-pull, a model upload mid-download, an evaluation mid-judging, a transcription
 * of long audio mid-download and an audio batch with some lines answered and the rest mid-download;
 * the last five mid-way by construction: a server of the test's holds the rest of their answers
 * until the platform is up again); then
 *
 *  1. every process of it is SIGKILLed at once and `./dev up` is run again on the same data: each
 *     piece of work finishes as it would have, nothing lost or counted twice, nothing left behind,
 *     every read model agrees with Temporal and every ended run says it ended;
 *  2. PostgreSQL alone is SIGKILLed under load and started again: meanwhile the API answers 503
 *     with Retry-After (never 500), and the work resumes with no operator;
 *  3. the same with Temporal alone.
 *
 * Each restart prints how long it took until every workflow in flight ran again (the figures of
 * docs/operators/running.md).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { SA_PHASE, SA_STATUS } from '../../shared/search-attributes';
import { createPool, type Db } from '../../db/pool';
import { containerFiles } from '../../providers/containers/podman/orphaned-address-leases';
import { chat, jsonl } from '../helpers/datasets';
import { startLocalRegistry, type LocalRegistry } from '../helpers/image-registry';
import { call, eventually } from '../helpers/platform';
import { podmanOf, testDeploymentBody } from '../helpers/podman-platform';
import { FAST_CLUSTERS, clusterBody, eventsOf } from '../helpers/clusters';
import { crashPlatform, type CrashPlatform } from './crash-platform';
import { JUDGE_TOKEN, startRuleJudge, type JudgeCall } from '../helpers/rule-judge';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import tar from 'tar-stream';
import { safetensorsFile } from '../helpers/archives';
import { REVISION_ENV, replicaOrigin } from '../../shared/deployments';
import { startHeldAnswers, type HeldAnswers } from './held-answers';
import { readFileSync } from 'node:fs';
import { audioRequestId } from '../../api/use-cases/audio';
import { audioWorkflowId, type AudioResult } from '../../shared/audio';
import { speak, wordErrorRate } from '../helpers/speech';
import { historyLines, waitingOn } from '../helpers/workflow-env';

const MODEL = 'gantry/reference-byte-tiny';
/** Lines of the file that is validating when the power goes. */
const FILE_LINES = 200_000;
/** Rows of the evaluation that is judging when the power goes, and how many its judge answers before it holds. */
const EVAL_ROWS = 40;
const JUDGED_BEFORE_HOLD = 10;

let cp: CrashPlatform;
let registry: LocalRegistry;
let image: string;
let key: string;
let db: Db;
let temporal: { connection: Connection; client: Client } | undefined;
/** The evaluation's external judge (test/helpers/rule-judge.ts): it outlives the platform's processes. */
let judge: Server;
const judgeCalls: JudgeCall[] = [];
/**
 * The judge answers the first JUDGED_BEFORE_HOLD calls, then holds every answer until the platform
 * is up again: the evaluation is mid-way at the kill by construction, not by a race with the clock.
 */
let releaseJudge: () => void;
const judgeReleased = new Promise<void>((resolve) => (releaseJudge = resolve));
const judgeAnswersWhen = (index: number) => (index < JUDGED_BEFORE_HOLD ? Promise.resolve() : judgeReleased);
/** The model archive a model upload downloads: the test's server holds its second half until the platform is up again. */
const WEIGHTS = safetensorsFile({ shape: [64, 64], fill: 'random' });
const CONFIG = Buffer.from(JSON.stringify({ architectures: ['TinyForCausalLM'] }));
let archive: HeldAnswers;
/**
 * The registry, seen through a server that holds the new image's manifest half-sent until the
 * platform is up again: the deployment rolling to it is mid-step (pulling) at the kill by construction.
 */
let heldRegistry: HeldAnswers;
let newImage: string;
/**
 * The audio of a transcription and of an audio batch's lines (espeak-ng speaking these sentences),
 * served by a server of the test's that holds the long audio, and every batch line's from
 * LINES_BEFORE_HOLD on, half-sent until the platform is up again: the transcription is mid-download
 * and the batch has some lines answered and the rest mid-download at the kill, by construction.
 */
const SENTENCES = [
  'The quick brown fox jumps over the lazy dog near the river bank.',
  'Please call the office tomorrow morning to confirm your appointment.',
  'Our team finished the project early and celebrated with a long lunch.',
  'We will meet at the station at noon on Friday.',
];
/** The long audio: the first three sentences, with pauses (two chunks at 10 s a chunk). */
const LONG_SCRIPT = SENTENCES.slice(0, 3).map((text) => ({
  text,
  voice: 'en-us',
  pause_after: 0.6,
}));
const SPEECH_MODEL = 'openai/whisper-tiny.en';
const LINES_BEFORE_HOLD = 2;
let audio: HeldAnswers;
/**
 * The file of FILE_LINES lines, made before the test: made mid-test, it held the event loop for
 * seconds, in which the API closed the idle connection the next call then took ('other side closed').
 */
let big: string;
/** Each WAV the audio server serves, by path. */
const wavs: Record<string, Buffer> = {};
/** A WAV's seconds of audio (its data over its byte rate), as the user's own tools count them. */
const secondsOf = (wav: Buffer) => (wav.length - 44) / wav.readUInt32LE(28);
const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const dataDir = mkdtempSync(path.join(tmpdir(), 'gantry-crash-'));

const api = (method: string, url: string, json?: unknown) => call(cp.apiUrl, method, `/v1${url}`, { key, json });

/** A WAV of the script spoken, made in the data directory. */
async function speakTo(name: string, script: Array<{ text: string; voice: string; pause_after?: number }>) {
  const wav = path.join(dataDir, `${name}.wav`);
  await speak(wav, script, path.join(dataDir, `${name}.json`));
  return readFileSync(wav);
}

async function connectTemporal(): Promise<Client> {
  await temporal?.connection.close().catch(() => undefined);
  const connection = await Connection.connect({ address: cp.temporalAddress });
  temporal = { connection, client: new Client({ connection, namespace: 'default' }) };
  return temporal.client;
}

/** Says where a workflow stands, for failure messages. */
const describeRun = async (h: WorkflowHandle) => {
  const d = await h.describe();
  return `${h.workflowId}: ${d.status.name} ${d.typedSearchAttributes.get(SA_STATUS)}`;
};

/** The step of the checkpoint the training activity's last heartbeat names (0: none yet). */
async function heartbeatCheckpoint(client: Client, id: string): Promise<number> {
  const pending = (await client.workflow.getHandle(`fine-tune/${id}`).describe()).raw.pendingActivities ?? [];
  for (const a of pending) {
    const payload = a.heartbeatDetails?.payloads?.[0]?.data;
    if (!payload) continue;
    const details = JSON.parse(Buffer.from(payload).toString('utf8'));
    if (details.checkpoint) return details.checkpoint.step as number;
  }
  return 0;
}

/**
 * Seconds from `since` until each workflow has completed a workflow task after it (it runs
 * again), or has closed. Polls Temporal's histories; resolves with each workflow's figure.
 */
async function runningAgain(client: Client, ids: string[], since: number, timeoutMs = 180_000) {
  const seconds = new Map<string, number>();
  const deadline = Date.now() + timeoutMs;
  while (seconds.size < ids.length) {
    for (const id of ids.filter((x) => !seconds.has(x))) {
      const handle = client.workflow.getHandle(id);
      const d = await handle.describe().catch(() => undefined);
      if (!d) continue;
      if (d.status.name !== 'RUNNING') {
        seconds.set(id, ((d.closeTime?.getTime() ?? Date.now()) - since) / 1000);
        continue;
      }
      const history = await handle.fetchHistory().catch(() => undefined);
      const ran = history?.events?.find(
        (e) =>
          e.workflowTaskCompletedEventAttributes &&
          e.eventTime?.seconds &&
          Number(e.eventTime.seconds) * 1000 + Math.floor((e.eventTime.nanos ?? 0) / 1e6) > since,
      );
      if (ran) {
        const at = Number(ran.eventTime!.seconds) * 1000 + Math.floor((ran.eventTime!.nanos ?? 0) / 1e6);
        seconds.set(id, (at - since) / 1000);
      }
    }
    if (Date.now() > deadline) throw new Error(`not running again: ${ids.filter((x) => !seconds.has(x)).join(', ')}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  return seconds;
}

/** When a closed run closed (ms). */
const closedAt = (d: { closeTime?: Date }) => d.closeTime?.getTime() ?? Date.now();

/** Every ended run in the namespace says how it ended in GantryPhase (continued-as-new runs did not end). */
async function endedRunsSayTheyEnded(client: Client): Promise<void> {
  const wrong: string[] = [];
  for await (const w of client.workflow.list({ query: 'ExecutionStatus != "Running"' })) {
    if (w.status.name === 'CONTINUED_AS_NEW') continue;
    const phase = w.typedSearchAttributes.get(SA_PHASE);
    if (phase !== undefined && phase !== 'done' && phase !== 'failed')
      wrong.push(`${w.workflowId} (${w.type}, ${w.status.name}): GantryPhase ${phase}`);
  }
  assert.deepEqual(wrong, [], 'every ended run says done or failed');
}

/** The containers (running or not) of a deployment on this machine, by the label Gantry gives them. */
const containersOf = (deploymentId: string, all = true) =>
  podmanOf(dataDir)([
    'ps',
    ...(all ? ['--all'] : []),
    '--no-trunc',
    '--filter',
    `label=gantry.deployment=${deploymentId}`,
    '--format',
    '{{.ID}}',
  ])
    .split('\n')
    .filter(Boolean);

/** The port forwards (CNI nat rules) and address leases that name any of these containers. */
async function leftFor(containerIds: string[]): Promise<string[]> {
  const nat = execFileSync('iptables', ['-w', '-t', 'nat', '-S'], { encoding: 'utf8' });
  const rules = nat.split('\n').filter((l) => containerIds.some((id) => l.includes(id)));
  const leases = (await containerFiles()).filter((f) => containerIds.includes(f.container)).map((f) => f.path);
  return [...rules, ...leases];
}

/** Intervals of a resource's usage still open after it ended, and intervals of one meter that overlap. */
async function meteringFaults(resourceId: string): Promise<string[]> {
  const rows = (
    await db.query<{ meter_key: string; started_at: Date; ended_at: Date | null }>(
      `SELECT meter_key, started_at, ended_at FROM metered_intervals
        WHERE attributes->>'resource_id' = $1 ORDER BY meter_key, started_at`,
      [resourceId],
    )
  ).rows;
  const faults = rows.filter((r) => r.ended_at === null).map((r) => `${r.meter_key} still open`);
  for (let i = 1; i < rows.length; i++) {
    const [a, b] = [rows[i - 1], rows[i]];
    if (a.meter_key === b.meter_key && a.ended_at && b.started_at < a.ended_at)
      faults.push(`${a.meter_key} counted twice from ${b.started_at.toISOString()}`);
  }
  return faults;
}

/**
 * What the ledger billed for a resource's metered usage, beside what its (closed) intervals held:
 * equal to the micro-hour per record when nothing was lost or counted twice.
 */
async function billedAndMetered(resourceId: string): Promise<{ billed: number; metered: number; records: number }> {
  const billed = await db.query<{ q: string | null; n: string }>(
    `SELECT sum(quantity) AS q, count(*) AS n FROM usage_records
      WHERE resource_id = $1 AND starts_with(idempotency_key, 'meter/')`,
    [resourceId],
  );
  const metered = await db.query<{ q: string | null }>(
    `SELECT sum(units * extract(epoch FROM (ended_at - started_at)) / 3600) AS q
       FROM metered_intervals WHERE attributes->>'resource_id' = $1`,
    [resourceId],
  );
  return {
    billed: Number(billed.rows[0].q ?? 0),
    metered: Number(metered.rows[0].q ?? 0),
    records: Number(billed.rows[0].n),
  };
}

describe('the whole platform killed at once, then PostgreSQL alone, then Temporal alone', { timeout: 900_000 }, () => {
  before(async () => {
    registry = await startLocalRegistry(dataDir);
    image = await registry.publish('http-replica');
    // The image a deployment rolls to (a repository of its own), pulled through the holding server.
    heldRegistry = await startHeldAnswers({
      upstream: `http://${registry.address}`,
      holds: (req) => req.method === 'GET' && /\/manifests\//.test(req.url ?? ''),
    });
    newImage = (await registry.publish('http-replica', 'gantry-examples/http-replica-next')).replace(
      registry.address,
      heldRegistry.address,
    );
    const pack = tar.pack();
    pack.entry({ name: 'model.safetensors' }, WEIGHTS);
    pack.entry({ name: 'config.json' }, CONFIG);
    pack.finalize();
    archive = await startHeldAnswers({
      bodies: { '/model.tar': await buffer(Readable.from(pack)) },
      holds: () => true,
    });
    big = Array.from({ length: FILE_LINES }, (_, i) => jsonl(chat(`q${i}`, `a${i}`))).join('');
    // The audio, spoken now; its server holds the long audio and the batch lines after the first two.
    wavs['/long.wav'] = await speakTo('long', LONG_SCRIPT);
    for (const [i, text] of SENTENCES.entries())
      wavs[`/line-${i}.wav`] = await speakTo(`line-${i}`, [{ text, voice: 'en-us' }]);
    audio = await startHeldAnswers({
      bodies: wavs,
      holds: (req) =>
        req.url === '/long.wav' || Number(/^\/line-(\d+)\.wav$/.exec(req.url ?? '')?.[1]) >= LINES_BEFORE_HOLD,
    });
    cp = await crashPlatform(dataDir, {
      ...FAST_CLUSTERS,
      // Bring-up takes some seconds (it is mid-way when the power goes), health rounds are quick.
      GANTRY_FLEET_STEP_MS: '600',
      GANTRY_CONTAINER_RUNTIME: 'podman',
      GANTRY_INSECURE_REGISTRIES: `${registry.address},${heldRegistry.address}`,
      // Endpoints are not part of this test: no model server image is built.
      GANTRY_MODEL_SERVER_IMAGE: 'localhost/unused-model-server:none',
      GANTRY_TORCH_MODEL_SERVER_IMAGE: 'localhost/unused-model-server:none',
      GANTRY_ACCELERATOR: 'simulated',
      // Training and validation keep ./dev up's heartbeat timeouts (60 s, 30 s): the recovery
      // figures printed are a default installation's.
      GANTRY_WORKER_SHUTDOWN_GRACE_SECONDS: '1',
      GANTRY_REPLICA_ADOPTION_SECONDS: '20',
      GANTRY_USAGE_METER_SECONDS: '10',
      // The evaluation's judge and the model upload's source listen on loopback.
      GANTRY_REMOTE_FETCH_ALLOW_PRIVATE: 'true',
      // The long audio is recognized as several chunks, in parallel.
      GANTRY_AUDIO_CHUNK_SECONDS: '10',
      // A fetch holds a slot of its speech host: three are held at the kill, two lines are recognized.
      GANTRY_SPEECH_SLOTS: '6',
    });
    judge = await startRuleJudge(judgeCalls, judgeAnswersWhen);
    await cp.up();
    key = cp.adminKey();
    db = createPool(cp.databaseUrl(), 2);
    // PostgreSQL is killed under it in the second test: the pool's idle clients see their server go.
    db.on('error', () => undefined);
  });
  /** The deployments this test made: their containers are removed whatever happened. */
  const ours = { deployments: [] as string[] };
  after(async () => {
    releaseJudge();
    judge?.close();
    await archive?.close();
    await audio?.close();
    await heldRegistry?.close();
    await temporal?.connection.close().catch(() => undefined);
    await db?.end().catch(() => undefined);
    await cp?.stop();
    for (const id of ours.deployments) {
      const ids = containersOf(id);
      if (ids.length) podmanOf(dataDir)(['rm', '--force', '--time', '0', ...ids]);
    }
    await registry?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test(
    'SIGKILL to every process at once, ./dev up again: everything finishes once, nothing left behind',
    // 232 s at most in green runs; the room is for the rolling deployment's backstop (below), which
    // ends about 6 minutes after the roll, with the checks after it still to run.
    { timeout: 720_000 },
    async () => {
      let client = await connectTemporal();

      // ---- work of each kind, in flight at once ----
      // A deployment serving (podman), whose queue also holds the queue jobs.
      /** A deployment of one replica of the test's image; its id (its containers are removed after). */
      const oneReplica = async (name: string): Promise<string> => {
        const created = await api('POST', '/deployments', testDeploymentBody(name, image));
        assert.equal(created.status, 200, JSON.stringify(created.body));
        ours.deployments.push(created.body.id);
        return created.body.id;
      };
      const depId = await oneReplica('crash-serving');
      // A second one, rolled to a new image just before the kill.
      const rollId = await oneReplica('crash-rolling');
      // A cluster that comes up now, and whose node is to be repaired at the kill.
      const healing = await api(
        'POST',
        '/compute/clusters',
        clusterBody({ cluster_name: 'crash-remediating', num_gpus: 8 }),
      );
      assert.equal(healing.status, 200, JSON.stringify(healing.body));
      const healingId: string = healing.body.cluster_id ?? healing.body.id;

      // The fine-tune's training file validates meanwhile.
      // Long enough that training is still going when the rest is in flight, on a loaded machine too
      // (with 96 records, a run beside three other test files finished training before the kill).
      const records = Array.from({ length: 192 }, (_, i) =>
        chat(`Spell ${i}`, `${i} is ${String(i).split('').join('-')}.`),
      );
      const trainForm = new FormData();
      trainForm.append('purpose', 'fine-tune');
      trainForm.append('file_name', 'train.jsonl');
      trainForm.append('file', new Blob([jsonl(...records)]), 'train.jsonl');
      const train = await call(cp.apiUrl, 'POST', '/v1/files/upload', { key, body: trainForm });
      assert.equal(train.status, 200, JSON.stringify(train.body));

      // A transcription of long audio, its download held half-way: the user's request waits on it
      // (its speech host heartbeats meanwhile); the kill ends the user's wait.
      const audioUrl = (p: string) => `http://${audio.address}${p}`;
      const transcribeForm = new FormData();
      transcribeForm.append('model', SPEECH_MODEL);
      transcribeForm.append('response_format', 'verbose_json');
      transcribeForm.append('file', audioUrl('/long.wav'));
      const transcribing = call(cp.apiUrl, 'POST', '/v1/audio/transcriptions', { key, body: transcribeForm }).then(
        (r) => ({ status: r.status, body: r.body }),
        (err: Error) => ({ error: String(err.cause ?? err) }),
      );
      // Positive evidence: its workflow runs and a speech host is fetching the audio (half of it sent).
      const transcriptionWorkflow = await eventually(
        async () => {
          for await (const w of client.workflow.list({ query: `WorkflowType = 'audioRequest'` })) return w.workflowId;
          return undefined;
        },
        (id) => id !== undefined && audio.firstPartsSent() === 1,
        60_000,
        50,
      );
      const transcriptionId = transcriptionWorkflow!.slice('audio/'.length);
      assert.equal(audioWorkflowId(transcriptionId), transcriptionWorkflow);

      // An audio batch of four lines: two are answered, the other two mid-download at the kill.
      const batchInput = new FormData();
      batchInput.append('purpose', 'batch-api');
      batchInput.append('file_name', 'speech.jsonl');
      batchInput.append(
        'file',
        new Blob([
          SENTENCES.map((_, i) =>
            JSON.stringify({ custom_id: `line-${i}`, body: { file: audioUrl(`/line-${i}.wav`) } }),
          ).join('\n') + '\n',
        ]),
        'speech.jsonl',
      );
      const batchFile = await call(cp.apiUrl, 'POST', '/v1/files/upload', { key, body: batchInput });
      assert.equal(batchFile.status, 200, JSON.stringify(batchFile.body));
      const batchCreated = await api('POST', '/batches', {
        endpoint: '/v1/audio/transcriptions',
        input_file_id: batchFile.body.id,
        model_id: SPEECH_MODEL,
      });
      assert.equal(batchCreated.status, 200, JSON.stringify(batchCreated.body));
      const batchId: string = batchCreated.body.job.id;
      const answeredLines = async () =>
        (await db.query('SELECT count(*)::int AS n FROM batch_answers WHERE batch_id = $1', [batchId])).rows[0]
          .n as number;
      await eventually(
        async () => ({ answered: await answeredLines(), held: audio.firstPartsSent() }),
        (r) => r.answered === LINES_BEFORE_HOLD && r.held === 1 + SENTENCES.length - LINES_BEFORE_HOLD,
        90_000,
        50,
      ).catch(async (err) => {
        throw new Error(`${err.message}; the audio server was asked ${audio.requests().join(', ')}`);
      });
      /** The speech request of each batch line: its id is derived from the batch and the line's call key. */
      const lineWorkflows = SENTENCES.map((_, i) =>
        audioWorkflowId(audioRequestId({ kind: 'batch', id: batchId }, `line-${i}`)),
      );

      // Queue jobs: three pending at different priorities, two claimed (once the deployment serves).
      for (const name of ['crash-serving', 'crash-rolling'])
        await eventually(
          () => api('GET', `/deployments/${name}`),
          (r) => r.body.status === 'Ready',
          180_000,
        );
      const rollContainerBefore = containersOf(rollId, false);
      assert.equal(rollContainerBefore.length, 1);

      // The cluster's node fails its health checks (the simulator's fault): the remediation the
      // cluster proposes waits for a person's approval, which comes only after the restart.
      const healthy = await eventually(
        () => api('GET', `/compute/clusters/${healingId}`),
        (r) => r.body.status === 'Ready',
        180_000,
        250,
      );
      const sickNode = healthy.body.gpu_worker_nodes[0];
      const fault = await api('POST', '/compute/fleet/faults', {
        cluster_id: healingId,
        kind: 'health_check_failure',
        node_id: sickNode.node_id,
        count: 100,
      });
      assert.equal(fault.status, 200, JSON.stringify(fault.body));
      const jobs: Array<{ id: string; priority: number; info: Record<string, unknown> }> = [];
      for (const [i, priority] of [5, 1, 9, 3, 7].entries()) {
        const info = { n: i, note: `job ${i}` };
        const r = await api('POST', '/queue/submit', { model: 'crash-serving', payload: { i }, priority, info });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        jobs.push({ id: r.body.request_id, priority, info });
      }
      const claimed: Array<{ request_id: string; claim_token: string }> = [];
      for (let i = 0; i < 2; i++) {
        const c = await api('POST', '/queue/claim', { model: 'crash-serving', claim_timeout_seconds: 60 });
        assert.equal(c.status, 200, JSON.stringify(c.body));
        claimed.push(c.body);
      }
      // Highest priority first: the claimed jobs are the 9 and the 7.
      assert.deepEqual(
        claimed.map((c) => jobs.find((j) => j.id === c.request_id)!.priority),
        [9, 7],
      );

      // The fine-tune first; the shorter pieces of work start once it trains, so that each is
      // mid-way at the kill: a file of 200,000 lines validating and a cluster coming up.
      await eventually(
        () => api('GET', `/files/${train.body.id}`),
        (r) => r.body.processing_status === 'COMPLETED',
        120_000,
      );
      const ft = await api('POST', '/fine-tunes', {
        model: MODEL,
        training_file: train.body.id,
        n_epochs: 20,
        n_checkpoints: 20,
        learning_rate: 0.003,
        batch_size: 1,
        max_seq_length: 64,
        random_seed: 5,
      });
      assert.equal(ft.status, 200, JSON.stringify(ft.body));
      const ftId: string = ft.body.id;
      // The fine-tune past a checkpoint: the server holds a heartbeat naming a stored one (the job's
      // checkpoint_save event comes first: a crash between the two restarts training from step 0).
      const savedStep = await eventually(
        () => heartbeatCheckpoint(client, ftId),
        (step) => step > 0,
        150_000,
        100,
      ).catch(async (err) => {
        const events = (await api('GET', `/fine-tunes/${ftId}/events`)).body.data ?? [];
        throw new Error(`${err.message}; events: ${events.map((e: { type: string }) => e.type).join(', ')}`);
      });
      // The deployment rolls to a new image: its new replica's pull is held half-way (the old
      // replica serves on meanwhile).
      const rolled = await api('PATCH', '/deployments/crash-rolling', { image: newImage });
      assert.equal(rolled.status, 200, JSON.stringify(rolled.body));
      const rolledAt = Date.now();
      await eventually(
        () => api('GET', '/deployments/crash-rolling'),
        (r) =>
          r.body.status === 'Updating' &&
          Object.values(r.body.replica_events as Record<string, { revision_id: string }>).some(
            (e) => e.revision_id === '2',
          ) &&
          heldRegistry.firstPartsSent() > 0,
        60_000,
        50,
      );

      // An evaluation mid-judging: 40 rows, two at a time; the judge answers ten and holds the rest.
      const rows = Array.from({ length: EVAL_ROWS }, (_, i) => ({
        q: `q${i}`,
        answer: `a${i}`,
        mark: i % 4 ? 'good' : 'bad',
      }));
      const evalForm = new FormData();
      evalForm.append('purpose', 'eval');
      evalForm.append('file_name', 'rows.jsonl');
      evalForm.append('file', new Blob([rows.map((r) => JSON.stringify(r)).join('\n') + '\n']), 'rows.jsonl');
      const evalFile = await call(cp.apiUrl, 'POST', '/v1/files/upload', { key, body: evalForm });
      assert.equal(evalFile.status, 200, JSON.stringify(evalFile.body));
      const judgeUrl = `http://127.0.0.1:${(judge.address() as AddressInfo).port}/v1`;
      const evaluation = await api('POST', '/evaluation', {
        type: 'classify',
        parameters: {
          input_data_file_path: evalFile.body.id,
          judge: {
            model: 'judge-1',
            model_source: 'external',
            system_template: 'MARK:{{ mark }}',
            external_base_url: judgeUrl,
            external_api_token: JUDGE_TOKEN,
            num_workers: 2,
          },
          labels: ['good', 'bad'],
          pass_labels: ['good'],
          model_to_evaluate: 'answer',
        },
      });
      assert.equal(evaluation.status, 200, JSON.stringify(evaluation.body));
      const evalId: string = evaluation.body.workflow_id;
      // Positive evidence it is mid-way: the answered rows are recorded, two more are with the judge.
      await eventually(
        async () => ({
          asked: judgeCalls.length,
          recorded: (
            await db.query('SELECT count(*)::int AS n FROM evaluation_rows WHERE evaluation_id = $1', [evalId])
          ).rows[0].n as number,
        }),
        (r) => r.asked === JUDGED_BEFORE_HOLD + 2 && r.recorded === JUDGED_BEFORE_HOLD,
        60_000,
        50,
      );

      // The file that validates at the kill, made before the upload starts.
      const bigForm = new FormData();
      bigForm.append('purpose', 'fine-tune');
      bigForm.append('file_name', 'big.jsonl');
      bigForm.append('file', new Blob([big]), 'big.jsonl');

      // A model upload mid-download: the source sends the archive's first half and holds the rest.
      // (Late: the held download heartbeats no more, and its heartbeat timeout is a minute.)
      const whoami = await api('GET', '/whoami');
      const v2 = (method: string, url: string, json?: unknown) =>
        call(cp.apiUrl, method, `/v2/projects/${whoami.body.project_id}${url}`, { key, json });
      const model = await v2('POST', '/models', { baseModelId: MODEL, name: 'crash-imported', type: 'model' });
      assert.equal(model.status, 200, JSON.stringify(model.body));
      const modelId: string = model.body.id;
      const up = await v2('POST', '/models/uploads', { modelId, remoteUrl: `http://${archive.address}/model.tar` });
      assert.equal(up.status, 200, JSON.stringify(up.body));
      const uploadId: string = up.body.id;
      await eventually(
        () => v2('GET', `/models/uploads/${uploadId}`),
        (r) => r.body.status === 'REMOTE_UPLOAD_STATUS_RUNNING' && archive.firstPartsSent() === 1,
        60_000,
        50,
      );

      // A file of 200,000 lines validating, then a cluster coming up: the kill comes while both are
      // (the cluster last, as its bring-up is the shortest).
      const bigFile = await call(cp.apiUrl, 'POST', '/v1/files/upload', { key, body: bigForm }).catch((err) => {
        throw new Error(
          `the upload of big.jsonl: ${err.cause ?? err}; the platform said:\n${cp.output().slice(-3000)}`,
        );
      });
      assert.equal(bigFile.status, 200, JSON.stringify(bigFile.body));
      const fileId: string = bigFile.body.id;
      await eventually(
        () => api('GET', `/files/${fileId}`),
        (r) => r.body.processing_status !== 'QUEUED' && r.body.processing_status !== 'PENDING',
        60_000,
        50,
      );
      const cluster = await api('POST', '/compute/clusters', clusterBody({ cluster_name: 'crash-bring-up' }));
      assert.equal(cluster.status, 200, JSON.stringify(cluster.body));
      const clusterId: string = cluster.body.cluster_id ?? cluster.body.id;

      // ---- what was in flight when the power went (positive evidence for each) ----
      // Checked before the kill: should one have ended early, the test fails with the platform up,
      // and the tests after this one still have a platform to run on.
      const [clusterNow, fileNow, fineTuneNow, deploymentNow, evaluationNow, rollingNow, healingNow, batchNow] =
        await Promise.all(
          [
            `/compute/clusters/${clusterId}`,
            `/files/${fileId}`,
            `/fine-tunes/${ftId}`,
            '/deployments/crash-serving',
            `/evaluation/${evalId}`,
            '/deployments/crash-rolling',
            `/compute/clusters/${healingId}`,
            `/batches/${batchId}`,
          ].map((url) => api('GET', url).then((r) => r.body)),
        );
      const before = {
        cluster: clusterNow,
        file: fileNow,
        fineTune: fineTuneNow,
        deployment: deploymentNow,
        evaluation: evaluationNow,
        rolling: rollingNow,
        healing: healingNow,
        upload: (await v2('GET', `/models/uploads/${uploadId}`)).body,
        batch: batchNow,
        transcription: await client.workflow.getHandle(transcriptionWorkflow!).describe(),
        answeredLines: await answeredLines(),
      };
      assert.equal(before.fineTune.status, 'running');
      assert.notEqual(before.cluster.status, 'Ready', 'the cluster was still coming up');
      assert.equal(before.file.processing_status, 'RUNNING', 'the file was validating');
      assert.equal(before.evaluation.status, 'running', 'the evaluation was judging');
      assert.equal(before.rolling.status, 'Updating', 'the deployment was rolling');
      assert.equal(heldRegistry.droppedWhileHeld(), 0, "the new image's pull was under way");
      assert.deepEqual(containersOf(rollId, false), rollContainerBefore, 'the old replica serves on');
      assert.equal(before.upload.status, 'REMOTE_UPLOAD_STATUS_RUNNING', 'the model was downloading');
      assert.equal(before.healing.status, 'Degraded', JSON.stringify(before.healing.gpu_worker_nodes));
      const proposed = before.healing.gpu_worker_nodes.find(
        (n: { node_id: string }) => n.node_id === sickNode.node_id,
      )?.latest_remediation;
      assert.equal(proposed?.state, 'PENDING_APPROVAL', 'a remediation waited for approval');
      assert.deepEqual(archive.requests(), ['GET /model.tar'], 'half of it sent');
      assert.equal(before.transcription.status.name, 'RUNNING', 'the transcription was under way');
      assert.ok(
        (before.transcription.raw.pendingActivities ?? []).some((a) => a.activityType?.name === 'prepareAudio'),
        'the transcription was fetching its audio',
      );
      assert.equal(before.batch.status, 'IN_PROGRESS', JSON.stringify(before.batch));
      assert.equal(before.answeredLines, LINES_BEFORE_HOLD, 'two lines of the batch were answered');
      assert.equal(audio.droppedWhileHeld(), 0, 'the held audio was being fetched');
      assert.deepEqual(
        audio.requests().sort(),
        [...SENTENCES.map((_, i) => `GET /line-${i}.wav`), 'GET /long.wav'],
        'each audio asked for once: a fetch that waits is not presumed lost',
      );
      const inFlight = [
        `fine-tune/${ftId}`,
        `cluster/${clusterId}`,
        `deployment/${depId}`,
        `file-validation/${fileId}`,
        `evaluation/${evalId}`,
        `deployment/${rollId}`,
        `model-upload/${uploadId}`,
        `cluster/${healingId}`,
      ];
      const containersBefore = containersOf(depId, false);
      assert.equal(containersBefore.length, 1, 'one container serves before the crash');

      const killedAt = Date.now();
      await cp.killEverything();
      console.log(
        `[crash] killed every process; in flight: fine-tune at step ${savedStep}+ (${before.fineTune.status}), ` +
          `cluster ${before.cluster.status}, file ${before.file.processing_status}, deployment ${before.deployment.status}, ` +
          `${jobs.length - claimed.length} queue jobs pending and ${claimed.length} claimed, ` +
          `deployment rolling ${before.rolling.status}, model upload ${before.upload.status}, ` +
          `cluster ${before.healing.status} with a remediation ${proposed.state}, ` +
          `a transcription fetching its audio, an audio batch with ${before.answeredLines} of ${SENTENCES.length} lines answered`,
      );

      // ---- ./dev up again, on the same data; the judge answers again ----
      const restartAt = Date.now();
      await cp.up();
      releaseJudge();
      archive.release();
      heldRegistry.release();
      audio.release();
      // The kill dropped the held downloads (nobody is left to read them).
      assert.equal(archive.droppedWhileHeld(), 1, 'the held download was dropped');
      assert.ok(heldRegistry.droppedWhileHeld() > 0, 'the held pull was dropped');
      const readyS = (Date.now() - restartAt) / 1000;
      client = await connectTemporal();
      // The queue (first: the claims are held for 60 s, as a live worker's would be): every job still there with its priority and info; the claimed ones finish once.
      for (const j of jobs) {
        const s = await api('GET', `/queue/status?model=crash-serving&request_id=${j.id}`);
        assert.equal(s.status, 200);
        assert.equal(s.body.priority, j.priority);
        assert.deepEqual(Object.fromEntries(Object.keys(j.info).map((k) => [k, s.body.info[k]])), j.info, 'info kept');
      }
      for (const c of claimed) {
        const r = await api('POST', '/queue/complete', { model: 'crash-serving', ...c, outputs: { by: 'before' } });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.equal(r.body.status, 'done');
      }
      for (let i = 0; i < jobs.length - claimed.length; i++) {
        const c = await api('POST', '/queue/claim', { model: 'crash-serving' });
        assert.equal(c.status, 200, JSON.stringify(c.body));
        const r = await api('POST', '/queue/complete', { model: 'crash-serving', ...c.body, outputs: { by: 'after' } });
        assert.equal(r.status, 200);
      }
      assert.equal((await api('POST', '/queue/claim', { model: 'crash-serving' })).status, 204, 'no job twice');
      for (const j of jobs) {
        const s = await api('GET', `/queue/status?model=crash-serving&request_id=${j.id}`);
        assert.equal(s.body.status, 'done');
      }

      const again = await runningAgain(client, inFlight, restartAt);
      const slowest = Math.max(...again.values());
      console.log(
        `[crash] whole platform: down ${((restartAt - killedAt) / 1000).toFixed(1)} s; ./dev up ready in ${readyS.toFixed(1)} s; ` +
          `every workflow running again ${slowest.toFixed(1)} s after the restart (` +
          [...again].map(([id, s]) => `${id.split('/')[0]} ${s.toFixed(1)} s`).join(', ') +
          ')',
      );

      // The fine-tune resumed from a checkpoint and finished; each step recorded once.
      const done = await eventually(
        () => api('GET', `/fine-tunes/${ftId}`),
        (r) => ['completed', 'cancelled', 'error'].includes(r.body.status),
        300_000,
        500,
      );
      assert.equal(done.body.status, 'completed', JSON.stringify(done.body.events?.slice(-4)));
      const restart = done.body.events.find((e: { type: string }) => e.type === 'job_restarted');
      assert.ok(restart, done.body.events.map((e: { type: string }) => e.type).join(','));
      assert.ok(restart.step >= savedStep, `resumed from step ${restart.step}, the heartbeat named ${savedStep}`);
      assert.match(restart.message, /resumed from the checkpoint at step \d+/);
      const metrics = (await api('GET', `/fine-tunes/${ftId}/metrics`)).body.metrics;
      assert.deepEqual(
        metrics.map((m: Record<string, number>) => m['train/global_step']),
        Array.from({ length: metrics.length }, (_, i) => i + 1),
        'every step recorded once',
      );
      assert.equal(done.body.epochs_completed, 20);
      // The job's usage is one ledger record (billing counts it once).
      const ftUsage = await db.query('SELECT idempotency_key FROM usage_records WHERE resource_id = $1', [ftId]);
      assert.equal(ftUsage.rowCount, 1, `the fine-tune is charged once: ${JSON.stringify(ftUsage.rows)}`);

      // The file finished validating, every line counted.
      const file = await eventually(
        () => api('GET', `/files/${fileId}`),
        (r) => !['PENDING', 'QUEUED', 'RUNNING'].includes(r.body.processing_status),
        240_000,
        500,
      );
      assert.equal(file.body.processing_status, 'COMPLETED', JSON.stringify(file.body.validation_report));
      assert.equal(file.body.validation_report.nlines, FILE_LINES, 'every line counted once');

      // The evaluation finished with every row judged once: its counts are the file's (one row in
      // four is bad), and the judge was asked again only for the rows in flight at the kill (two).
      const judged = await eventually(
        () => api('GET', `/evaluation/${evalId}`),
        (r) => ['completed', 'error', 'user_error'].includes(r.body.status),
        180_000,
        500,
      );
      assert.equal(judged.body.status, 'completed', JSON.stringify(judged.body));
      assert.deepEqual(JSON.parse(judged.body.results.label_counts), { good: 30, bad: 10 });
      assert.equal(judged.body.results.invalid_label_count, 0);
      const recorded = await db.query('SELECT count(*)::int AS n FROM evaluation_rows WHERE evaluation_id = $1', [
        evalId,
      ]);
      assert.equal(recorded.rows[0].n, EVAL_ROWS, 'each row recorded once');
      assert.ok(
        judgeCalls.length >= EVAL_ROWS && judgeCalls.length <= EVAL_ROWS + 2,
        `the judge was asked ${judgeCalls.length} times for ${EVAL_ROWS} rows`,
      );

      // The transcription: the user's request ended with the kill (its connection went with the API),
      // and its workflow ran on to its end once: the words spoken, the audio's length, one usage
      // record of its minutes.
      const userSaw = await transcribing;
      assert.ok('error' in userSaw, `the request in flight ended with the kill: ${JSON.stringify(userSaw)}`);
      const transcribed = client.workflow.getHandle(transcriptionWorkflow!);
      await eventually(
        () => transcribed.describe(),
        (d) => d.status.name !== 'RUNNING',
        180_000,
        500,
      ).catch(async (err) => assert.fail(`${err.message}; ${await describeRun(transcribed)}`));
      const transcript = (await transcribed.result()) as AudioResult;
      const longSeconds = secondsOf(wavs['/long.wav']);
      assert.ok(Math.abs(transcript.duration - longSeconds) < 0.05, `${transcript.duration} s of ${longSeconds} s`);
      const spoken = LONG_SCRIPT.map((u) => u.text).join(' ');
      assert.ok(wordErrorRate(spoken, transcript.text) < 0.25, transcript.text);
      const transcriptionUsage = await db.query<{ quantity: string }>(
        'SELECT quantity FROM usage_records WHERE resource_id = $1',
        [transcriptionId],
      );
      assert.equal(transcriptionUsage.rowCount, 1, 'the transcription is billed once');
      assert.ok(
        Math.abs(Number(transcriptionUsage.rows[0].quantity) - longSeconds / 60) < 0.001,
        `${transcriptionUsage.rows[0].quantity} of ${longSeconds / 60} minutes`,
      );

      // The batch: COMPLETED, every line's transcript in its output once, in order; each line
      // billed once (its minutes); the lines answered before the kill not fetched again; no kept
      // call answer left.
      const batchEnded = await eventually(
        () => api('GET', `/batches/${batchId}`),
        (r) => ['COMPLETED', 'FAILED', 'EXPIRED', 'CANCELLED'].includes(r.body.status),
        180_000,
        500,
      );
      assert.equal(batchEnded.body.status, 'COMPLETED', JSON.stringify(batchEnded.body));
      assert.equal(batchEnded.body.progress, 100);
      assert.equal(batchEnded.body.error_file_id, undefined, 'no line failed');
      const batchOutput = String(
        (await call(cp.apiUrl, 'GET', `/v1/files/${batchEnded.body.output_file_id}/content`, { key })).body,
      )
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { custom_id: string; response: { status_code: number; body: { text: string } } });
      assert.deepEqual(
        batchOutput.map((o) => [o.custom_id, o.response.status_code]),
        SENTENCES.map((_, i) => [`line-${i}`, 200]),
        'every line answered once',
      );
      for (const [i, o] of batchOutput.entries())
        assert.ok(wordErrorRate(SENTENCES[i], o.response.body.text) < 0.25, `line ${i}: ${o.response.body.text}`);
      assert.equal(await answeredLines(), SENTENCES.length, 'each line recorded once');
      const batchUsage = await db.query<{ product: string; quantity: string; idempotency_key: string }>(
        'SELECT product, quantity, idempotency_key FROM usage_records WHERE resource_id = $1',
        [batchId],
      );
      assert.deepEqual(
        batchUsage.rows.map((r) => r.product),
        SENTENCES.map(() => 'Batch Inference - Transcription Minutes'),
        'each line billed once',
      );
      // Each line's minutes of audio (the lines' lengths differ by more than the decoder's rounding).
      const billedMinutes = batchUsage.rows.map((r) => Number(r.quantity)).sort((a, b) => a - b);
      const lineMinutes = SENTENCES.map((_, i) => secondsOf(wavs[`/line-${i}.wav`]) / 60).sort((a, b) => a - b);
      for (const [i, m] of lineMinutes.entries())
        assert.ok(
          Math.abs(billedMinutes[i] - m) < 0.001,
          `billed ${billedMinutes.join(', ')} for ${lineMinutes.join(', ')}`,
        );
      assert.equal(new Set(batchUsage.rows.map((r) => r.idempotency_key)).size, SENTENCES.length);
      for (let i = 0; i < LINES_BEFORE_HOLD; i++)
        assert.deepEqual(
          audio.requests().filter((r) => r === `GET /line-${i}.wav`),
          [`GET /line-${i}.wav`],
          `line ${i}, answered before the kill, was not fetched again`,
        );
      const keptAnswers = await db.query(
        `SELECT count(*)::int AS n FROM work_call_answers WHERE work_kind = 'batch' AND work_id = $1`,
        [batchId],
      );
      assert.equal(keptAnswers.rows[0].n, 0, "the gateway's kept answers are gone");
      // One speech request ran per line and one for the transcription: none twice.
      const audioRuns: string[] = [];
      for await (const w of client.workflow.list({ query: `WorkflowType = 'audioRequest'` })) {
        assert.equal(w.status.name, 'COMPLETED', w.workflowId);
        audioRuns.push(w.workflowId);
      }
      assert.deepEqual(audioRuns.sort(), [transcriptionWorkflow, ...lineWorkflows].sort());
      // The batch's run agrees: it says COMPLETED (done) and waits out the files' retention (7 days).
      const batchRun = await eventually(
        () => client.workflow.getHandle(`batch/${batchId}`).describe(),
        (d) => d.typedSearchAttributes.get(SA_STATUS) === 'COMPLETED',
        60_000,
        250,
      );
      assert.equal(batchRun.status.name, 'RUNNING');
      assert.equal(batchRun.typedSearchAttributes.get(SA_PHASE), 'done');
      console.log(
        `[crash] after the restart: the transcription (${longSeconds.toFixed(1)} s of audio) ended ` +
          `${((closedAt(await transcribed.describe()) - restartAt) / 1000).toFixed(1)} s, the audio batch ` +
          `${((Date.parse(batchEnded.body.completed_at) - restartAt) / 1000).toFixed(1)} s after it`,
      );

      // The model upload downloaded again and succeeded: one revision, its files whole, its events
      // in the order they happened, the restart among them.
      const imported = await eventually(
        () => v2('GET', `/models/uploads/${uploadId}`).then((r) => r.body),
        (u) => u.status === 'REMOTE_UPLOAD_STATUS_SUCCEEDED' || u.status === 'REMOTE_UPLOAD_STATUS_FAILED',
        180_000,
        500,
      );
      assert.equal(imported.status, 'REMOTE_UPLOAD_STATUS_SUCCEEDED', imported.statusMessage);
      assert.equal(imported.restartCount, 1);
      assert.deepEqual(archive.requests(), ['GET /model.tar', 'GET /model.tar'], 'downloaded again once');
      const revisions = (await v2('GET', `/models/${modelId}/revisions`)).body.data;
      assert.deepEqual(
        revisions.map((r: { revisionId: string; validationStatus: string }) => [r.revisionId, r.validationStatus]),
        [[imported.revisionId, 'REVISION_VALIDATION_STATUS_SUCCESS']],
        'one revision',
      );
      const files = (await v2('GET', `/models/${modelId}/files`)).body;
      assert.equal(files.revisionId, imported.revisionId);
      assert.deepEqual(
        files.data.map((f: { path: string; hash: string; sizeBytes: string }) => [f.path, f.hash, f.sizeBytes]),
        [
          ['config.json', sha(CONFIG), String(CONFIG.length)],
          ['model.safetensors', sha(WEIGHTS), String(WEIGHTS.length)],
        ],
      );
      const uploadEvents = (await v2('GET', `/models/uploads/${uploadId}/events`)).body.data;
      const eventIds = uploadEvents.map((e: { id: string }) => Number(e.id));
      assert.deepEqual(
        eventIds,
        [...eventIds].sort((a, b) => a - b),
        'events in the order they happened',
      );
      assert.deepEqual(
        uploadEvents.map((e: { type: string }) => e.type),
        [
          'download.started',
          'download.restarted',
          'file.stored',
          'file.stored',
          'download.finished',
          'revision.created',
          'upload.succeeded',
        ],
      );

      // The rollout finished: one replica, of the new revision and image, serving; the old one stopped.
      // The launch under way at the kill ends by its 30 s heartbeat timeout, or at the latest by its
      // 5-minute start-to-close timeout (workflows/deployment-entity.ts); the wait covers both.
      const rolledOut = await eventually(
        () => api('GET', '/deployments/crash-rolling'),
        (r) =>
          r.body.status === 'Ready' &&
          Object.values(r.body.replica_events as Record<string, { replica_status: string }>).filter(
            (e) => e.replica_status === 'Running',
          ).length === 1,
        Math.max(180_000, rolledAt + 6 * 60_000 - Date.now()),
        500,
      ).catch(async (err) => {
        const r = await api('GET', '/deployments/crash-rolling');
        // What the run waits on, and what the platform said of it: CI keeps only this message.
        const handle = client.workflow.getHandle(`deployment/${rollId}`);
        const run = await waitingOn(handle).catch((e: Error) => e.message);
        const history = await historyLines(handle).catch((e: Error) => e.message);
        const said = cp
          .output()
          .split('\n')
          .filter((line) => line.includes(rollId))
          .slice(-20)
          .join('\n');
        throw new Error(
          `${err.message}; ${r.body.status} ${JSON.stringify(r.body.replica_events)}; the run: ${run}; ` +
            `the platform said:\n${said}\nits history (the kill at ${new Date(killedAt).toISOString()}, the restart ready at ${new Date(restartAt + readyS * 1000).toISOString()}):\n${history}`,
        );
      });
      const running = Object.entries(
        rolledOut.body.replica_events as Record<
          string,
          { replica_status: string; revision_id: string; image: string; replica_ready_since?: string }
        >,
      ).filter(([, e]) => e.replica_status === 'Running');
      // When the new replica became ready (this check runs after the fine-tune's, so later).
      const readySince = Date.parse(running[0]?.[1].replica_ready_since ?? '');
      console.log(
        `[crash] the new replica of the rollout was ready ${((readySince - restartAt) / 1000).toFixed(1)} s after the restart`,
      );
      assert.deepEqual(
        running.map(([, e]) => [e.revision_id, e.image]),
        [['2', newImage]],
        JSON.stringify(rolledOut.body.replica_events),
      );
      assert.equal(rolledOut.body.ready_replicas, 1);
      // The replica that was launching at the kill, and the old one, say they ended.
      assert.deepEqual(
        Object.values(rolledOut.body.replica_events as Record<string, { replica_status: string }>)
          .map((e) => e.replica_status)
          .filter((s) => !['Running', 'Exited', 'Failed', 'Terminated', 'Lost'].includes(s)),
        [],
        JSON.stringify(rolledOut.body.replica_events),
      );
      const rollContainersAfter = containersOf(rollId, false);
      assert.equal(rollContainersAfter.length, 1, 'one container runs');
      assert.ok(!rollContainersAfter.includes(rollContainerBefore[0]), 'the old replica was stopped');
      const at = await db.query<{ address: string | null; port: number }>(
        'SELECT address, port FROM deployment_replicas WHERE replica_id = $1',
        [running[0][0]],
      );
      const served = await fetch(`${replicaOrigin(at.rows[0].address, at.rows[0].port)}/env?name=${REVISION_ENV}`).then(
        (r) => r.text(),
      );
      assert.equal(served, '2', 'the replica serving is of the new revision');

      // The remediation, approved now, reboots the node; the cluster is Ready again.
      const remediation = `/compute/clusters/${healingId}/instances/${sickNode.instance_id}/remediations/${proposed.id}`;
      const approved = await api('POST', `${remediation}/approve`, { comment: 'after the outage' });
      assert.equal(approved.status, 200, JSON.stringify(approved.body));
      const healed = await eventually(
        () => api('GET', `/compute/clusters/${healingId}`),
        (r) =>
          r.body.status === 'Ready' &&
          r.body.gpu_worker_nodes.find((n: { node_id: string }) => n.node_id === sickNode.node_id)?.latest_remediation
            ?.state === 'SUCCEEDED',
        180_000,
        500,
      );
      assert.equal(healed.body.num_gpus, 8);
      assert.deepEqual(
        eventsOf(healed.body)
          .filter((e: { node_id: string }) => e.node_id === sickNode.node_id)
          .map((e: { reason: string }) => e.reason),
        ['HealthCheckFailed', 'RemediationStarted', 'NodeCordoned', 'RemediationRunning', 'RemediationSucceeded'],
        'each step of the remediation once',
      );

      // The cluster came up, with its nodes.
      const ready = await eventually(
        () => api('GET', `/compute/clusters/${clusterId}`),
        (r) => r.body.status === 'Ready',
        180_000,
        500,
      );
      assert.equal(ready.body.num_gpus, 16);

      // The deployment: one replica Running, one container, the one from before (adopted).
      const serving = await eventually(
        () => api('GET', '/deployments/crash-serving'),
        (r) =>
          r.body.status === 'Ready' &&
          Object.values(r.body.replica_events as Record<string, { replica_status: string }>).filter(
            (e) => e.replica_status === 'Running',
          ).length === 1,
        120_000,
        500,
      );
      assert.ok(serving);
      assert.deepEqual(
        containersOf(depId, false),
        containersBefore,
        'the container from before is adopted, no second one',
      );

      // ---- ends: delete what lives on; nothing is left running, leased, forwarded or metered ----
      assert.equal((await api('DELETE', `/compute/clusters/${clusterId}`)).status, 200);
      assert.equal((await api('DELETE', `/compute/clusters/${healingId}`)).status, 200);
      assert.equal((await api('DELETE', '/deployments/crash-serving')).status, 200);
      assert.equal((await api('DELETE', '/deployments/crash-rolling')).status, 200);
      for (const id of [
        `cluster/${clusterId}`,
        `cluster/${healingId}`,
        `deployment/${depId}`,
        `deployment/${rollId}`,
      ]) {
        const h = client.workflow.getHandle(id);
        await eventually(
          () => h.describe(),
          (d) => d.status.name !== 'RUNNING',
          120_000,
          250,
        ).catch(async (err) => assert.fail(`${err.message}; ${await describeRun(h)}`));
      }
      assert.deepEqual(containersOf(depId), [], 'no container of the deleted deployment');
      assert.deepEqual(containersOf(rollId), [], 'no container of the deleted deployment');
      assert.deepEqual(
        await leftFor([...containersBefore, ...rollContainerBefore, ...rollContainersAfter]),
        [],
        'no port forward or address lease',
      );
      assert.deepEqual(await meteringFaults(depId), []);
      assert.deepEqual(await meteringFaults(rollId), []);
      assert.deepEqual(await meteringFaults(clusterId), []);
      assert.deepEqual(await meteringFaults(healingId), []);
      for (const r of [depId, rollId, clusterId, healingId]) {
        const { billed, metered, records } = await billedAndMetered(r);
        assert.ok(metered > 0, `${r} was metered`);
        // Each record is rounded to the micro-hour (times its units): nothing lost, nothing twice.
        assert.ok(
          Math.abs(billed - metered) <= 16e-6 * (records + 1),
          `${r}: billed ${billed} h, metered ${metered} h`,
        );
      }

      // Every read model agrees with Temporal; every ended run says it ended.
      const ftRun = await client.workflow.getHandle(`fine-tune/${ftId}`).describe();
      assert.equal(ftRun.status.name, 'COMPLETED');
      assert.equal(ftRun.typedSearchAttributes.get(SA_STATUS), 'completed');
      const fileRun = await client.workflow.getHandle(`file-validation/${fileId}`).describe();
      assert.equal(fileRun.status.name, 'COMPLETED');
      const uploadRun = await client.workflow.getHandle(`model-upload/${uploadId}`).describe();
      assert.equal(uploadRun.status.name, 'COMPLETED');
      assert.equal(uploadRun.typedSearchAttributes.get(SA_STATUS), 'REMOTE_UPLOAD_STATUS_SUCCEEDED');
      // The deleted ones' runs have ended: their read models say deleted (or are gone).
      for (const url of [
        `/compute/clusters/${clusterId}`,
        `/compute/clusters/${healingId}`,
        '/deployments/crash-serving',
        '/deployments/crash-rolling',
      ]) {
        const r = await api('GET', url);
        assert.ok(r.status === 404 || /^delet/i.test(r.body.status), `${url}: ${r.status} ${r.body.status}`);
      }
      await endedRunsSayTheyEnded(client);
    },
  );

  test(
    'PostgreSQL alone killed under load: 503 with Retry-After meanwhile, then work resumes with no operator',
    { timeout: 600_000 },
    async () => {
      const client = await connectTemporal();
      // Work in flight: a cluster coming up (its projections need the database) and queue traffic.
      const cluster = await api('POST', '/compute/clusters', clusterBody({ cluster_name: 'crash-pg' }));
      assert.equal(cluster.status, 200, JSON.stringify(cluster.body));
      const clusterId: string = cluster.body.cluster_id ?? cluster.body.id;
      await eventually(
        () => api('GET', `/compute/clusters/${clusterId}`),
        (r) => r.body.status !== undefined,
      );

      await cp.killPostgres();
      // Positive evidence: the API saw the database gone and said so, as 503 with Retry-After.
      const seen: number[] = [];
      const answer = await eventually(
        async () => {
          const r = await call(cp.apiUrl, 'GET', '/v1/files', { key });
          seen.push(r.status);
          return { status: r.status, retryAfter: r.headers.get('retry-after') };
        },
        (r) => r.status === 503,
        60_000,
        100,
      );
      assert.ok(Number(answer.retryAfter) > 0, `Retry-After ${answer.retryAfter}`);
      const write = await call(cp.apiUrl, 'POST', '/v1/compute/clusters', {
        key,
        json: clusterBody({ cluster_name: 'crash-pg-2' }),
      });
      assert.equal(write.status, 503, JSON.stringify(write.body));
      assert.ok(Number(write.headers.get('retry-after')) > 0);
      assert.ok(!seen.includes(500), `answers while PostgreSQL was down: ${seen.join(',')}`);

      const restartAt = Date.now();
      await cp.restartPostgres();
      await eventually(
        () => call(cp.apiUrl, 'GET', '/v1/files', { key }).then((r) => r.status),
        (s) => s === 200,
        60_000,
        100,
      );
      const apiS = (Date.now() - restartAt) / 1000;
      const again = await runningAgain(client, [`cluster/${clusterId}`], restartAt);
      const ready = await eventually(
        () => api('GET', `/compute/clusters/${clusterId}`),
        (r) => r.body.status === 'Ready',
        180_000,
        500,
      );
      const readyS = (Date.now() - restartAt) / 1000;
      console.log(
        `[crash] PostgreSQL alone: API answering again ${apiS.toFixed(1)} s after its restart; ` +
          `workflows running again ${Math.max(...again.values()).toFixed(1)} s; the cluster in flight Ready ${readyS.toFixed(1)} s`,
      );
      assert.equal(ready.body.num_gpus, 16);
      assert.equal((await api('DELETE', `/compute/clusters/${clusterId}`)).status, 200);
      await eventually(
        () => client.workflow.getHandle(`cluster/${clusterId}`).describe(),
        (d) => d.status.name !== 'RUNNING',
        120_000,
        250,
      );
      assert.deepEqual(await meteringFaults(clusterId), []);
      await endedRunsSayTheyEnded(client);
    },
  );

  test(
    'Temporal alone killed under load: 503 with Retry-After meanwhile, then work resumes with no operator',
    { timeout: 600_000 },
    async () => {
      let client = await connectTemporal();
      const cluster = await api('POST', '/compute/clusters', clusterBody({ cluster_name: 'crash-temporal' }));
      assert.equal(cluster.status, 200, JSON.stringify(cluster.body));
      const clusterId: string = cluster.body.cluster_id ?? cluster.body.id;

      await cp.killTemporal();
      const seen: number[] = [];
      const write = await eventually(
        async () => {
          const r = await call(cp.apiUrl, 'POST', '/v1/compute/clusters', {
            key,
            json: clusterBody({ cluster_name: `crash-t-${seen.length}` }),
          });
          seen.push(r.status);
          return { status: r.status, retryAfter: r.headers.get('retry-after'), body: r.body };
        },
        (r) => r.status !== 200,
        60_000,
        200,
      );
      assert.equal(write.status, 503, JSON.stringify(write.body));
      assert.ok(Number(write.retryAfter) > 0, `Retry-After ${write.retryAfter}`);
      assert.ok(!seen.includes(500), `answers while Temporal was down: ${seen.join(',')}`);
      // Reads come from PostgreSQL: they go on.
      assert.equal((await api('GET', `/compute/clusters/${clusterId}`)).status, 200);

      const restartAt = Date.now();
      await cp.restartTemporal();
      client = await connectTemporal();
      const created = await eventually(
        () => api('POST', '/compute/clusters', clusterBody({ cluster_name: 'crash-after-temporal' })),
        (r) => r.status === 200,
        60_000,
        200,
      );
      const apiS = (Date.now() - restartAt) / 1000;
      const ids = [`cluster/${clusterId}`, `cluster/${created.body.cluster_id ?? created.body.id}`];
      const again = await runningAgain(client, ids, restartAt);
      for (const id of ids) {
        const cid = id.split('/')[1];
        await eventually(
          () => api('GET', `/compute/clusters/${cid}`),
          (r) => r.body.status === 'Ready',
          180_000,
          500,
        );
      }
      const readyS = (Date.now() - restartAt) / 1000;
      console.log(
        `[crash] Temporal alone: API starting work again ${apiS.toFixed(1)} s after its restart; ` +
          `workflows running again ${Math.max(...again.values()).toFixed(1)} s; both clusters Ready ${readyS.toFixed(1)} s`,
      );
      // Nobody restarted a Gantry process: the platform's own processes lived through it.
      assert.match(cp.output(), /\[gantry\] ready:/);
      assert.doesNotMatch(cp.output(), /exited unexpectedly/);
      for (const id of ids) {
        assert.equal((await api('DELETE', `/compute/clusters/${id.split('/')[1]}`)).status, 200);
        await eventually(
          () => client.workflow.getHandle(id).describe(),
          (d) => d.status.name !== 'RUNNING',
          120_000,
          250,
        );
      }
      await endedRunsSayTheyEnded(client);
    },
  );
});
