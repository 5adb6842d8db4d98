/**
 * What the PyTorch trainer's tests share: a platform whose GPU work runs in real GPU worker
 * processes (which have the torch trainer, GANTRY_TORCH_TRAINER_PYTHON, and the installed model,
 * GANTRY_MODEL_DIR, as ./dev exports them), tiny SmolLM2 datasets, and the user's view of a job.
 */
import { call, eventually, startTestPlatform, uploadValidated, type TestPlatform } from '../helpers/platform';
import { chat, jsonl } from '../helpers/datasets';
import { startProcess, type StartedProcess } from '../helpers/processes';
import { createTenant, type Tenant } from '../helpers/tenants';

export const SMOLLM2 = 'HuggingFaceTB/SmolLM2-135M-Instruct';

/** SmolLM2's parameters as its model card counts them (tied embeddings counted once). */
export const SMOLLM2_PARAMETERS = 134_515_008;

export interface TorchPlatform {
  p: TestPlatform;
  a: Tenant;
  startGpuWorker(): Promise<StartedProcess>;
  /** Kills every GPU worker still running and stops the platform. */
  stop(): Promise<void>;
  create(body: object): Promise<string>;
  finished(id: string): Promise<any>;
  metrics(id: string): Promise<any[]>;
  checkpoints(id: string): Promise<any[]>;
}

export async function startTorchPlatform(env: Record<string, string> = {}): Promise<TorchPlatform> {
  const p = await startTestPlatform({ gpuTypes: [], env });
  const a = await createTenant(p.db);
  const workers: StartedProcess[] = [];
  return {
    p,
    a,
    async startGpuWorker() {
      const w = startProcess('workers/gpu.ts', { GANTRY_GPU_TYPES: 'H100_SXM', GANTRY_ACCELERATOR: 'simulated' });
      workers.push(w);
      await w.waitFor(/SIMULATED accelerator host/);
      return w;
    },
    async stop() {
      for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
      await p.stop();
    },
    async create(body) {
      const res = await call(p.baseUrl, 'POST', '/v1/fine-tunes', { key: a.key, json: { model: SMOLLM2, ...body } });
      if (res.status !== 200) throw new Error(`create: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.id;
    },
    async finished(id) {
      const done = await eventually(
        () => call(p.baseUrl, 'GET', `/v1/fine-tunes/${id}`, { key: a.key }),
        (r) => ['completed', 'cancelled', 'error'].includes(r.body.status),
        280_000,
      );
      return done.body;
    },
    async metrics(id) {
      return (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${id}/metrics`, { key: a.key })).body.metrics;
    },
    async checkpoints(id) {
      return (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${id}/checkpoints`, { key: a.key })).body.data;
    },
  };
}

/** Four short chats (one row each: `packing: false`) whose answers follow one pattern. */
export const sftRecords = (n = 4) =>
  Array.from({ length: n }, (_, i) => chat(`What is ${i} + 2?`, `${i} + 2 = ${i + 2}.`));

export const preferenceRecords = (n = 4) =>
  Array.from({ length: n }, (_, i) => ({
    input: { messages: [{ role: 'user', content: `Say the number ${i}.` }] },
    preferred_output: [{ role: 'assistant', content: `${i}` }],
    non_preferred_output: [{ role: 'assistant', content: 'I will not.' }],
  }));

export const upload = (t: TorchPlatform, name: string, records: object[]) =>
  uploadValidated(t.p, t.a.key, name, jsonl(...records));
