/**
 * The official Python SDK's own defaults for `fine_tuning.create` (PyPI `together`, pinned), in
 * process: what the SDK sends when the caller leaves a parameter out (validation_file "", batch_size
 * "max", an unset LoRA as no training_type, and in its price estimate dpo_beta 0 or model "") must
 * be accepted with its meaning, and the job a user reads back must hold the model's own defaults.
 * Every parameter of the signature is also passed spelled out at its default, read from the SDK's
 * signature itself, so a parameter a newer pin adds is covered too. Bad input still gets a 400
 * naming the field.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { chat, jsonl } from '../helpers/datasets';
import { startTestPlatform, uploadValidated, type TestPlatform } from '../helpers/platform';
import { pythonSdk, type PythonClient } from '../helpers/python-sdk';
import { createTenant, type Tenant } from '../helpers/tenants';

const MODEL = 'gantry/reference-byte-tiny';

let p: TestPlatform;
let t: Tenant;
let sdk: PythonClient;
let trainId: string;
let preferenceId: string;

before(async () => {
  p = await startTestPlatform();
  t = await createTenant(p.db, { projectRole: 'Admin', organizationRole: 'Admin' });
  sdk = { baseUrl: p.baseUrl, key: t.key };
  const records = Array.from({ length: 8 }, (_, i) => chat(`What is ${i} plus ${i}?`, `${2 * i}.`));
  trainId = await uploadValidated(p, t.key, 'train.jsonl', jsonl(...records));
  const pairs = Array.from({ length: 8 }, (_, i) => ({
    input: { messages: [{ role: 'user', content: `Say ${i}` }] },
    preferred_output: [{ role: 'assistant', content: `${i}` }],
    non_preferred_output: [{ role: 'assistant', content: 'no' }],
  }));
  preferenceId = await uploadValidated(p, t.key, 'pairs.jsonl', jsonl(...pairs));
});
after(() => p.stop());

/**
 * A Python prelude: the client, and `seen(job)`, the job as a user reads it back (retrieve), with
 * the job cancelled afterwards (the jobs need not train here; the SDK's own completion runs are in
 * python-files-and-fine-tuning.test.ts).
 */
const PRELUDE = `
import asyncio, inspect, json
from together import AsyncTogether, Together, APIStatusError
client = Together()
MODEL = ${JSON.stringify(MODEL)}

def seen(job):
    j = client.fine_tuning.retrieve(job.id)
    client.fine_tuning.cancel(job.id)
    return {
        "validation_file": j.validation_file, "n_epochs": j.n_epochs, "n_evals": j.n_evals,
        "n_checkpoints": j.n_checkpoints, "batch_size": j.batch_size, "learning_rate": j.learning_rate,
        "max_seq_length": j.max_seq_length, "packing": j.packing, "warmup_ratio": j.warmup_ratio,
        "training_type": j.training_type.model_dump() if j.training_type else None,
        "training_method": j.training_method.model_dump() if j.training_method else None,
        "lr_scheduler": j.lr_scheduler.model_dump() if j.lr_scheduler else None,
    }

def refused(call):
    try:
        call()
    except APIStatusError as e:
        return {"status": e.status_code, "body": e.body}
    return {"status": "accepted"}
`;

/** The model's limits as the SDK reads them (what the defaults must come from). */
async function limits(): Promise<any> {
  return pythonSdk(
    sdk,
    `${PRELUDE}
print(json.dumps(client.fine_tuning.model_limits(model_name=MODEL).model_dump()))`,
  );
}

test('create with only training_file and model: accepted, and the job holds the model defaults', async () => {
  const l = await limits();
  const job = await pythonSdk(
    sdk,
    `${PRELUDE}
print(json.dumps(seen(client.fine_tuning.create(training_file=${JSON.stringify(trainId)}, model=MODEL))))`,
  );
  assert.equal(job.validation_file ?? null, null, 'no validation file: "" means unset');
  assert.equal(job.n_epochs, 1);
  assert.equal(job.n_evals, 0);
  assert.equal(job.n_checkpoints, 1);
  assert.equal(job.batch_size, l.lora_training.max_batch_size, 'batch_size "max": the LoRA maximum');
  assert.equal(job.learning_rate, 0.00001);
  assert.equal(job.max_seq_length, l.max_seq_length_sft);
  assert.equal(job.packing, true);
  assert.equal(job.warmup_ratio, 0);
  assert.equal(job.training_type.type, 'Lora', 'LoRA when the SDK sends no training type');
  assert.equal(job.training_type.lora_r, l.lora_training.default_rank);
  assert.equal(job.training_type.lora_alpha, 8, "the spec's default alpha");
  assert.equal(job.training_type.lora_dropout, 0);
  assert.equal(
    job.training_type.lora_trainable_modules,
    l.lora_training.target_modules.join(','),
    'all-linear: every target module of the model',
  );
  assert.equal(job.training_method.method, 'sft');
  assert.equal(job.training_method.train_on_inputs, 'auto');
  assert.equal(job.lr_scheduler.lr_scheduler_type, 'cosine');
  assert.deepEqual(job.lr_scheduler.lr_scheduler_args, { min_lr_ratio: 0, num_cycles: 0.5 });
});

test("every parameter of the SDK's signature spelled out at its own default: the same job", async () => {
  const seen = await pythonSdk(
    sdk,
    `${PRELUDE}
sig = inspect.signature(client.fine_tuning.create)
# training_file and model have no default; model_limits=None makes the SDK fetch them; verbose prints.
defaults = {n: p.default for n, p in sig.parameters.items()
            if p.default is not inspect.Parameter.empty and n not in ("model", "model_limits", "verbose")}
job = seen(client.fine_tuning.create(training_file=${JSON.stringify(trainId)}, model=MODEL, **defaults))
print(json.dumps({"defaults": defaults, "job": job}))`,
  );
  // The pinned SDK's defaults this test relies on being exercised (a newer pin may add more).
  assert.equal(seen.defaults.validation_file, '');
  assert.equal(seen.defaults.batch_size, 'max');
  assert.equal(seen.defaults.lora_trainable_modules, 'all-linear');
  assert.ok(Object.keys(seen.defaults).length >= 40, Object.keys(seen.defaults).join(', '));
  assert.equal(seen.job.validation_file ?? null, null);
  assert.equal(seen.job.training_type.type, 'Lora');
  assert.equal(seen.job.n_epochs, 1);
});

test('the async client (its LoRA default is on: rank from the limits, alpha twice the rank)', async () => {
  const l = await limits();
  const job = await pythonSdk(
    sdk,
    `${PRELUDE}
async def main():
    job = await AsyncTogether().fine_tuning.create(training_file=${JSON.stringify(trainId)}, model=MODEL)
    return seen(job)
print(json.dumps(asyncio.run(main())))`,
  );
  assert.equal(job.training_type.type, 'Lora');
  assert.equal(job.training_type.lora_r, l.lora_training.default_rank);
  assert.equal(job.training_type.lora_alpha, 2 * l.lora_training.default_rank);
  assert.equal(job.validation_file ?? null, null);
});

test('full training and DPO with the rest at defaults (the estimate sends dpo_beta 0 for unset)', async () => {
  const l = await limits();
  const jobs = await pythonSdk(
    sdk,
    `${PRELUDE}
full = seen(client.fine_tuning.create(training_file=${JSON.stringify(trainId)}, model=MODEL, lora=False))
dpo = seen(client.fine_tuning.create(training_file=${JSON.stringify(preferenceId)}, model=MODEL, training_method="dpo"))
print(json.dumps({"full": full, "dpo": dpo}))`,
  );
  assert.deepEqual(jobs.full.training_type, { type: 'Full' });
  assert.equal(jobs.full.batch_size, l.full_training.max_batch_size);
  assert.equal(jobs.dpo.training_method.method, 'dpo');
  assert.equal(jobs.dpo.training_method.dpo_beta, 0.1, 'the default beta');
  assert.equal(jobs.dpo.batch_size, l.lora_training.max_batch_size_dpo);
});

test('bad input still gets a 400 naming the field', async () => {
  const r = await pythonSdk(
    sdk,
    `${PRELUDE}
tf = ${JSON.stringify(trainId)}
print(json.dumps({
    "validation_file": refused(lambda: client.fine_tuning.create(training_file=tf, model=MODEL, validation_file="file-not-here")),
    "training_file": refused(lambda: client.fine_tuning.create(training_file="", model=MODEL)),
    "lora_trainable_modules": refused(lambda: client.fine_tuning.create(training_file=tf, model=MODEL, lora=True, lora_trainable_modules="not_a_layer")),
    "dpo_beta": refused(lambda: client.fine_tuning.create(training_file=${JSON.stringify(preferenceId)}, model=MODEL, training_method="dpo", dpo_beta=-1)),
}))`,
  );
  const param = (x: any) => x.body?.param ?? x.body?.error?.param;
  assert.equal(r.validation_file.status, 400, JSON.stringify(r.validation_file));
  assert.equal(param(r.validation_file), 'validation_file');
  assert.equal(r.training_file.status, 400, JSON.stringify(r.training_file));
  assert.equal(param(r.training_file), 'training_file');
  assert.equal(r.lora_trainable_modules.status, 400, JSON.stringify(r.lora_trainable_modules));
  assert.equal(param(r.lora_trainable_modules), 'training_type.lora_trainable_modules');
  assert.equal(r.dpo_beta.status, 400, JSON.stringify(r.dpo_beta));
  assert.equal(param(r.dpo_beta), 'training_method.dpo_beta');
});
