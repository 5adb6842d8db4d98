/**
 * `gantry fine-tuning`: create (every parameter of the spec's table, the price
 * shown and confirmed), preview of tokenization, list, retrieve, cancel,
 * delete, events, checkpoints, metrics, and downloads of weights and of the
 * tokenized dataset.
 */
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { bool, context, float, int, oneOf } from '../context';
import { CliError, EXIT, usageError } from '../errors';
import { bytes, confirm, details, money, print, table, time, yesNo, type Cell } from '../output';
import { saveResponse } from '../transfer';
import { fileIdOrUpload, isLocalPath } from './files';

type Job = Record<string, any>;

const TERMINAL = ['completed', 'cancelled', 'error'];

const batchSize = (raw: string): number | 'max' => {
  if (raw === 'max') return 'max';
  return int(1)(raw);
};
const trainOnInputs = (raw: string): boolean | 'auto' => (raw === 'auto' ? 'auto' : bool(raw));
const suffix = (raw: string) => {
  if (raw.length > 40) throw new InvalidArgumentError('must be at most 40 characters.');
  return raw;
};

interface CreateOptions {
  trainingFile: string;
  model?: string;
  fromCheckpoint?: string;
  validationFile?: string;
  suffix?: string;
  packing?: boolean;
  maxSeqLength?: number;
  nEpochs?: number;
  nEvals?: number;
  nCheckpoints?: number;
  batchSize?: number | 'max';
  learningRate?: number;
  lrSchedulerType?: 'linear' | 'cosine';
  minLrRatio?: number;
  schedulerNumCycles?: number;
  warmupRatio?: number;
  maxGradNorm?: number;
  weightDecay?: number;
  randomSeed?: number;
  trainOnInputs?: boolean | 'auto';
  trainVision?: boolean;
  lora?: boolean;
  loraR?: number;
  loraAlpha?: number;
  loraDropout?: number;
  loraTrainableModules?: string;
  trainingMethod: 'sft' | 'dpo';
  dpoBeta?: number;
  rpoAlpha?: number;
  simpoGamma?: number;
  dpoNormalizeLogratiosByLength?: boolean;
  earlyStoppingEnabled?: boolean;
  earlyStoppingPatience?: number;
  earlyStoppingMinDelta?: number;
  earlyStoppingWarmupEvals?: number;
  fromHfModel?: string;
  hfModelRevision?: string;
  hfApiToken?: string;
  hfOutputRepoName?: string;
  wandbApiKey?: string;
  wandbBaseUrl?: string;
  wandbProjectName?: string;
  wandbName?: string;
  wandbEntity?: string;
  confirm?: boolean;
}

/** The tool's default LoRA rank (spec: "default 8 in the tool"). */
const DEFAULT_LORA_R = 8;

/** The rules the tool can check before asking the API (each a usage error naming the flag). */
function checkCreateOptions(o: CreateOptions) {
  if (o.model && o.fromCheckpoint) throw usageError('--model and --from-checkpoint are mutually exclusive.');
  if (!o.model && !o.fromCheckpoint) throw usageError('--model is required (or --from-checkpoint).');
  if (o.nCheckpoints !== undefined && o.nCheckpoints > (o.nEpochs ?? 1))
    throw usageError('--n-checkpoints may not exceed --n-epochs (default 1).');
  if ((o.nEvals ?? 0) > 0 && !o.validationFile) throw usageError('--validation-file is required when --n-evals > 0.');
  if (o.packing === false && o.maxSeqLength === undefined)
    throw usageError('--max-seq-length is required with --no-packing.');
  if (o.trainingMethod !== 'dpo') {
    for (const [flag, v] of [
      ['--dpo-beta', o.dpoBeta],
      ['--rpo-alpha', o.rpoAlpha],
      ['--simpo-gamma', o.simpoGamma],
      ['--dpo-normalize-logratios-by-length', o.dpoNormalizeLogratiosByLength],
    ] as const) {
      if (v !== undefined) throw usageError(`${flag} needs --training-method dpo.`);
    }
  } else if (o.trainOnInputs !== undefined) {
    throw usageError('--train-on-inputs applies to --training-method sft only.');
  }
  if (o.lora === false) {
    for (const [flag, v] of [
      ['--lora-r', o.loraR],
      ['--lora-alpha', o.loraAlpha],
      ['--lora-dropout', o.loraDropout],
      ['--lora-trainable-modules', o.loraTrainableModules],
    ] as const) {
      if (v !== undefined) throw usageError(`${flag} cannot be used with --no-lora.`);
    }
  }
}

/** The request body of POST /v1/fine-tunes (and estimate-price) from the options. */
function createBody(o: CreateOptions, trainingFile: string, validationFile: string | undefined) {
  const loraGiven = [o.loraR, o.loraAlpha, o.loraDropout, o.loraTrainableModules].some((v) => v !== undefined);
  // With --from-checkpoint the job inherits the parent's type and rank unless told otherwise.
  const trainingType =
    o.lora === false
      ? { type: 'Full' }
      : o.fromCheckpoint && o.lora === undefined && !loraGiven
        ? undefined
        : {
            type: 'Lora',
            lora_r: o.loraR ?? (o.fromCheckpoint ? undefined : DEFAULT_LORA_R),
            lora_alpha: o.loraAlpha,
            lora_dropout: o.loraDropout,
            lora_trainable_modules: o.loraTrainableModules,
          };
  const scheduler =
    o.lrSchedulerType !== undefined || o.minLrRatio !== undefined || o.schedulerNumCycles !== undefined
      ? {
          lr_scheduler_type: o.lrSchedulerType ?? 'cosine',
          lr_scheduler_args: { min_lr_ratio: o.minLrRatio, num_cycles: o.schedulerNumCycles },
        }
      : undefined;
  const trackerGiven = [o.wandbBaseUrl, o.wandbProjectName, o.wandbName, o.wandbEntity].some((v) => v !== undefined);
  return {
    training_file: trainingFile,
    validation_file: validationFile,
    model: o.model,
    from_checkpoint: o.fromCheckpoint,
    suffix: o.suffix,
    packing: o.packing,
    max_seq_length: o.maxSeqLength,
    n_epochs: o.nEpochs,
    n_evals: o.nEvals,
    n_checkpoints: o.nCheckpoints,
    batch_size: o.batchSize,
    learning_rate: o.learningRate,
    lr_scheduler: scheduler,
    warmup_ratio: o.warmupRatio,
    max_grad_norm: o.maxGradNorm,
    weight_decay: o.weightDecay,
    random_seed: o.randomSeed,
    training_method:
      o.trainingMethod === 'dpo'
        ? {
            method: 'dpo',
            dpo_beta: o.dpoBeta,
            rpo_alpha: o.rpoAlpha,
            simpo_gamma: o.simpoGamma,
            dpo_normalize_logratios_by_length: o.dpoNormalizeLogratiosByLength,
          }
        : { method: 'sft', train_on_inputs: o.trainOnInputs },
    training_type: trainingType,
    train_vision: o.trainVision || undefined,
    early_stopping_enabled: o.earlyStoppingEnabled,
    early_stopping_patience: o.earlyStoppingPatience,
    early_stopping_min_delta: o.earlyStoppingMinDelta,
    early_stopping_warmup_evals: o.earlyStoppingWarmupEvals,
    from_hf_model: o.fromHfModel,
    hf_model_revision: o.hfModelRevision,
    hf_api_token: o.hfApiToken,
    hf_output_repo_name: o.hfOutputRepoName,
    // The tracker key falls back to WANDB_API_KEY when another tracker option asks for a tracker.
    wandb_api_key: o.wandbApiKey ?? (trackerGiven ? process.env.WANDB_API_KEY : undefined),
    wandb_base_url: o.wandbBaseUrl,
    wandb_project_name: o.wandbProjectName,
    wandb_name: o.wandbName,
    wandb_entity: o.wandbEntity,
  };
}

/** JSON.stringify drops undefined fields: the API sees only what was given (and the tool's defaults). */
const clean = <T>(v: T): T => JSON.parse(JSON.stringify(v));

function estimateRows(e: Record<string, any>): [string, Cell][] {
  if (!e.estimation_available) return [['Price estimate', `not available (${e.unavailable_reason})`]];
  return [
    ['Estimated price', money(e.estimated_total_price)],
    ['Training tokens', e.estimated_train_token_count],
    ['Evaluation tokens', e.estimated_eval_token_count],
    ['Remaining credit', money(e.user_limit)],
    ['Within credit', yesNo(e.allowed_to_proceed)],
  ];
}

export function jobDetails(j: Job): string {
  const t = j.training_type ?? {};
  const sched = j.lr_scheduler ?? {};
  return details([
    ['ID', j.id],
    ['Status', j.status],
    ['Model', j.model],
    ...(j.from_checkpoint ? ([['From checkpoint', j.from_checkpoint]] as [string, Cell][]) : []),
    ['Training file', j.training_file],
    ['Validation file', j.validation_file],
    ['Method', j.training_method?.method],
    [
      'Training type',
      t.type === 'Lora'
        ? `LoRA (r ${t.lora_r}, alpha ${t.lora_alpha}, dropout ${t.lora_dropout}, ${t.lora_trainable_modules})`
        : t.type,
    ],
    ['Epochs', `${j.epochs_completed ?? 0} / ${j.n_epochs} completed`],
    ['Checkpoints / evals', `${j.n_checkpoints} / ${j.n_evals}`],
    ['Batch size', j.batch_size],
    ['Learning rate', j.learning_rate],
    [
      'Scheduler',
      `${sched.lr_scheduler_type} (min ratio ${sched.lr_scheduler_args?.min_lr_ratio}, cycles ${sched.lr_scheduler_args?.num_cycles}), warmup ${j.warmup_ratio}`,
    ],
    ['Max seq length', `${j.max_seq_length}${j.packing ? ', packed' : ', no packing'}`],
    ['Train on inputs', String(j.train_on_inputs)],
    ['Seed', j.random_seed],
    ['Tokens', j.token_count],
    ['Output name', j.model_output_name],
    ...(j.model_object_id
      ? ([['Model object', `${j.model_object_name ?? ''} (${j.model_object_id})`]] as [string, Cell][])
      : []),
    ...(j.adapter_object_id
      ? ([['Adapter object', `${j.adapter_object_name ?? ''} (${j.adapter_object_id})`]] as [string, Cell][])
      : []),
    ...(j.early_stopped ? ([['Early stopped', `best step ${j.early_stopping_best_step}`]] as [string, Cell][]) : []),
    ...(j.error ? ([['Error', j.error]] as [string, Cell][]) : []),
    ['Created', time(j.created_at)],
    ['Updated', time(j.updated_at)],
  ]);
}

const jobPath = (id: string) => `/v1/fine-tunes/${encodeURIComponent(id)}`;

/** A token as it reads in a table: escapes for control characters, `␣` for a space. */
const showToken = (t: string) => JSON.stringify(t).slice(1, -1).replace(/ /g, '␣');

export function addFineTuningCommands(program: Command) {
  const ft = program.command('fine-tuning').alias('fine-tunes').description('Fine-tuning jobs');

  ft.command('create')
    .description('Start a fine-tuning job; the estimated price is shown and confirmed first')
    .requiredOption('--training-file <file>', 'file id, or a local path (checked and uploaded first); max 25 GB')
    .option('--model <model>', 'base model (required unless --from-checkpoint)')
    .option(
      '--from-checkpoint <ref>',
      'start from JOB_ID or OUTPUT_MODEL_NAME, optionally :STEP (final checkpoint without); not with --model',
    )
    .option('--validation-file <file>', 'file id or local path; required when --n-evals > 0')
    .option('--suffix <text>', 'appended to the output model name (at most 40 characters)', suffix)
    .option('--packing', 'pack samples into sequences (default)')
    .option('--no-packing', 'one sample per sequence; needs --max-seq-length')
    .option('--max-seq-length <n>', 'default: the model maximum for the training method', int(1))
    .option('--n-epochs <n>', 'epochs, 1-20 (default 1)', int(1, 20))
    .option('--n-evals <n>', 'evaluations, 0-100 (default 0)', int(0, 100))
    .option('--n-checkpoints <n>', 'checkpoints, 1 to --n-epochs (default 1; the last epoch always saves one)', int(1))
    .option('--batch-size <n|max>', "integer or 'max' (default max; bounds per model)", batchSize)
    .option('--learning-rate <x>', 'default 0.00001, 0.00000001-0.01', float(1e-8, 0.01))
    .option('--lr-scheduler-type <type>', 'linear or cosine (default cosine)', oneOf('linear', 'cosine'))
    .option('--min-lr-ratio <x>', 'default 0.0, 0.0-1.0', float(0, 1))
    .option('--scheduler-num-cycles <x>', 'cosine cycles, >= 0 (default 0.5)', float(0))
    .option('--warmup-ratio <x>', 'default 0.0, 0.0-1.0', float(0, 1))
    .option('--max-grad-norm <x>', 'default 1.0, >= 0; 0 disables clipping', float(0))
    .option('--weight-decay <x>', 'default 0.0, >= 0', float(0))
    .option('--random-seed <n>', 'default: chosen by the server (and kept on the job)', int(0))
    .option(
      '--train-on-inputs <true|false|auto>',
      'default auto: text datasets train on everything, messages and prompt/completion on outputs only',
      trainOnInputs,
    )
    .option('--train-vision', 'train the vision encoder too (vision-language models only)')
    .option('--no-train-vision', 'leave the vision encoder frozen (default)')
    .option('--lora', 'LoRA fine-tuning (what the service picks for most models when neither is given)')
    .option('--no-lora', 'full fine-tuning')
    .option('--lora-r <n>', `LoRA rank, 1-64 (default ${DEFAULT_LORA_R})`, int(1, 64))
    .option('--lora-alpha <x>', 'LoRA alpha, >= 1 (default 8)', float(1))
    .option('--lora-dropout <x>', 'LoRA dropout, 0.0-1.0 (default 0.0)', float(0, 1))
    .option('--lora-trainable-modules <list>', "comma-separated modules (default 'all-linear')")
    .option('--training-method <method>', 'sft or dpo', oneOf('sft', 'dpo'), 'sft')
    .option('--dpo-beta <x>', 'DPO beta (dpo only)', float(Number.MIN_VALUE))
    .option('--rpo-alpha <x>', 'RPO alpha (dpo only)', float())
    .option('--simpo-gamma <x>', 'SimPO gamma (dpo only)', float())
    .option('--dpo-normalize-logratios-by-length', 'normalize DPO log-ratios by length (dpo only; default false)')
    .option(
      '--early-stopping-enabled',
      'stop when the eval loss stops improving; needs --validation-file and --n-evals >= patience + warmup evals + 1',
    )
    .option('--early-stopping-patience <n>', 'evaluations without improvement before stopping (default 2)', int(1))
    .option('--early-stopping-min-delta <x>', 'least improvement that counts (default 0)', float(0))
    .option('--early-stopping-warmup-evals <n>', 'evaluations before early stopping may act (default 0)', int(0))
    .option('--from-hf-model <repo>', 'model hub: start from this repository')
    .option('--hf-model-revision <rev>', 'model hub: revision of --from-hf-model')
    .option('--hf-api-token <token>', 'model hub: access token')
    .option('--hf-output-repo-name <repo>', 'model hub: upload the result to this repository')
    .option('--wandb-api-key <key>', 'tracker: API key (default: WANDB_API_KEY when another tracker option is set)')
    .option('--wandb-base-url <url>', 'tracker: base URL')
    .option('--wandb-project-name <name>', 'tracker: project name')
    .option('--wandb-name <name>', 'tracker: run name')
    .option('--wandb-entity <entity>', 'tracker: entity')
    .option('--confirm', 'create the job without asking to confirm the price')
    .action(async (o: CreateOptions, cmd: Command) => {
      const ctx = context(cmd);
      checkCreateOptions(o);
      const canAsk = !!process.stdin.isTTY && !!process.stderr.isTTY;
      const refuse = () =>
        usageError('Not confirmed: pass --confirm to create the job without a prompt (no terminal to ask on).');
      // Nothing is uploaded for a job that will not be created.
      const uploads = [o.trainingFile, o.validationFile].some((v) => v !== undefined && isLocalPath(v));
      if (!o.confirm && !canAsk && uploads) throw refuse();
      if (o.trainVision && o.model) {
        const limits = await ctx.client.get('/v1/fine-tunes/models/limits', { model_name: o.model });
        if (!limits.supports_vision) throw usageError(`--train-vision: ${o.model} is not a vision-language model.`);
      }
      const trainingFile = await fileIdOrUpload(ctx, o.trainingFile, 'the training file');
      const validationFile = o.validationFile
        ? await fileIdOrUpload(ctx, o.validationFile, 'the validation file')
        : undefined;
      const body = clean(createBody(o, trainingFile, validationFile));

      const estimate = await ctx.client.post('/v1/fine-tunes/estimate-price', body);
      ctx.out.note(details(estimateRows(estimate)));
      if (estimate.estimation_available && !estimate.allowed_to_proceed) {
        ctx.out.note('Warning: the estimated price exceeds the remaining credit.');
      }
      if (!o.confirm) {
        if (!canAsk) throw refuse();
        if (!(await confirm('Create this fine-tuning job?'))) throw usageError('Not confirmed: no job was created.');
      }
      const job = await ctx.client.post<Job>('/v1/fine-tunes', body);
      ctx.out.result(job, () => {
        print(jobDetails(job));
        print(`Follow it with: gantry fine-tuning retrieve ${job.id}`);
      });
    });

  ft.command('preview')
    .description('How the first rows of a training file will be tokenized and trained')
    .requiredOption('--training-file <file>', 'file id (or a local path, checked and uploaded first)')
    .requiredOption('--model <model>', 'base model')
    .option('--top-k <n>', 'rows to show, 1-50 (default 5)', int(1, 50))
    .option('--train-on-inputs <true|false|auto>', 'default auto', trainOnInputs)
    .option('--training-method <method>', 'sft only', oneOf('sft'), 'sft')
    .action(
      async (
        o: { trainingFile: string; model: string; topK?: number; trainOnInputs?: boolean | 'auto' },
        cmd: Command,
      ) => {
        const ctx = context(cmd);
        const trainingFile = await fileIdOrUpload(ctx, o.trainingFile, 'the training file');
        const preview = await ctx.client.post(
          '/v1/fine-tunes/preview',
          clean({
            model: o.model,
            training_file: trainingFile,
            top_k: o.topK,
            train_on_inputs: o.trainOnInputs === 'auto' ? undefined : o.trainOnInputs,
            training_method: 'sft',
          }),
        );
        ctx.out.result(preview, () => {
          print(
            `${preview.model}: ${preview.dataset_format} dataset, max_seq_length ${preview.max_seq_length}, train_on_inputs ${preview.train_on_inputs}`,
          );
          print(
            table(
              ['row', 'tokens', 'trained', 'truncated', 'trained spans', 'first 32 tokens'],
              preview.rows.map((r: Record<string, any>) => [
                r.row_index,
                r.num_tokens,
                r.num_trained_tokens,
                yesNo(r.truncated),
                r.trained_spans.map(([a, b]: number[]) => `[${a}, ${b})`).join(' '),
                r.tokens.map(showToken).join(' '),
              ]),
            ),
          );
        });
      },
    );

  ft.command('list')
    .description("The project's fine-tuning jobs, newest first")
    .action(async (_o, cmd: Command) => {
      const { client, out } = context(cmd);
      const list = await client.get<{ data: Job[] }>('/v1/fine-tunes');
      out.result(list, () =>
        print(
          list.data.length
            ? table(
                ['id', 'status', 'model', 'output name', 'created', 'updated'],
                list.data.map((j) => [
                  j.id,
                  j.status,
                  j.model,
                  j.model_output_name,
                  time(j.created_at),
                  time(j.updated_at),
                ]),
              )
            : 'No fine-tuning jobs.',
        ),
      );
    });

  ft.command('retrieve')
    .alias('get')
    .description('A fine-tuning job')
    .argument('<job-id>')
    .action(async (id: string, _o, cmd: Command) => {
      const { client, out } = context(cmd);
      const job = await client.get<Job>(jobPath(id));
      out.result(job, () => print(jobDetails(job)));
    });

  ft.command('wait')
    .description('Wait until a job finishes; exit code 0 when it completed, 1 when it failed or was cancelled')
    .argument('<job-id>')
    .option('--timeout <seconds>', 'give up after this long (default 3600)', int(1), 3600)
    .action(async (id: string, o: { timeout: number }, cmd: Command) => {
      const { client, out } = context(cmd);
      const deadline = Date.now() + o.timeout * 1000;
      let job = await client.get<Job>(jobPath(id));
      let last = '';
      while (!TERMINAL.includes(job.status)) {
        if (job.status !== last) out.note(`${job.id}: ${job.status}`);
        last = job.status;
        if (Date.now() > deadline)
          throw new CliError(`Job ${id} is still ${job.status} after ${o.timeout} s.`, EXIT.API);
        await new Promise((r) => setTimeout(r, 1000));
        job = await client.get<Job>(jobPath(id));
      }
      out.result(job, () => print(jobDetails(job)));
      if (job.status !== 'completed') {
        const err = new CliError(`Job ${id} ended ${job.status}${job.error ? `: ${job.error}` : '.'}`, EXIT.API);
        err.jsonPrinted = out.json;
        throw err;
      }
    });

  ft.command('cancel')
    .description('Cancel a job: training stops after its current step')
    .argument('<job-id>')
    .action(async (id: string, _o, cmd: Command) => {
      const { client, out } = context(cmd);
      const job = await client.post<Job>(`${jobPath(id)}/cancel`);
      out.result(job, () => print(`${job.id}: ${job.status}`));
    });

  ft.command('delete')
    .description('Delete a finished job and everything it stored (registry copies stay)')
    .argument('<job-id>')
    .option('--force', 'cancel a running job first')
    .action(async (id: string, o: { force?: boolean }, cmd: Command) => {
      const { client, out } = context(cmd);
      const res = await client.delete(jobPath(id), { force: o.force ? 'true' : undefined });
      out.result(res, () => print(res.message));
    });

  ft.command('events')
    .description("A job's events, oldest first")
    .argument('<job-id>')
    .action(async (id: string, _o, cmd: Command) => {
      const { client, out } = context(cmd);
      const events = await client.get<{ data: Record<string, any>[] }>(`${jobPath(id)}/events`);
      out.result(events, () =>
        print(
          table(
            ['time', 'level', 'type', 'step', 'message'],
            events.data.map((e) => [time(e.created_at), e.level, e.type, e.step, e.message]),
          ),
        ),
      );
    });

  ft.command('checkpoints')
    .description("A job's checkpoints; the download id goes to `gantry fine-tuning download`")
    .argument('<job-id>')
    .action(async (id: string, _o, cmd: Command) => {
      const { client, out } = context(cmd);
      const res = await client.get<{ data: Record<string, any>[] }>(`${jobPath(id)}/checkpoints`);
      out.result(res, () =>
        print(
          res.data.length
            ? table(
                ['step', 'type', 'weights', 'download id', 'registry name', 'created'],
                res.data.map((c) => [
                  c.step,
                  c.checkpoint_type,
                  c.checkpoint,
                  c.path,
                  c.object_name,
                  time(c.created_at),
                ]),
              )
            : 'No checkpoints yet.',
        ),
      );
    });

  ft.command('metrics')
    .description('Training metrics by step: loss, learning rate, gradient norm, eval loss')
    .argument('<job-id>')
    .action(async (id: string, _o, cmd: Command) => {
      const { client, out } = context(cmd);
      const res = await client.get<{ metrics: Record<string, number>[] }>(`${jobPath(id)}/metrics`);
      const num = (v: unknown, digits = 4) => (typeof v === 'number' ? Number(v.toPrecision(digits)) : undefined);
      out.result(res, () =>
        print(
          res.metrics.length
            ? table(
                ['step', 'epoch', 'loss', 'learning rate', 'grad norm', 'eval loss', 'reward margin'],
                res.metrics.map((m) => [
                  m['train/global_step'],
                  num(m['train/epoch'], 3),
                  num(m['train/loss']),
                  num(m['train/learning_rate'], 3),
                  num(m['train/grad_norm']),
                  num(m['eval/loss']),
                  num(m['train/reward_margin']),
                ]),
              )
            : 'No metrics yet.',
        ),
      );
    });

  ft.command('download')
    .description('Download weights as a .tar.zst: the final model, its adapter, or one checkpoint')
    .argument('<job-id>', 'job id, or a checkpoint download id <job-id>:<step>')
    .option(
      '--checkpoint-type <type>',
      'merged, adapter or default (default: merged for LoRA jobs, the full model otherwise)',
      oneOf('merged', 'adapter', 'default'),
    )
    .option('--checkpoint-step <n>', 'an intermediate checkpoint (overrides --checkpoint-type)', int(1))
    .option('-o, --output <path>', 'where to write it (default: <job-id>[-adapter][-step-N].tar.zst)')
    .action(
      async (
        ref: string,
        o: { checkpointType?: 'merged' | 'adapter' | 'default'; checkpointStep?: number; output?: string },
        cmd: Command,
      ) => {
        const { client, out } = context(cmd);
        const [jobId, stepPart] = ref.split(':');
        if (stepPart !== undefined && !/^\d+$/.test(stepPart)) throw usageError(`'${ref}' is not <job-id>:<step>.`);
        const step = o.checkpointStep ?? (stepPart !== undefined ? Number(stepPart) : undefined);
        const kind = step === undefined && o.checkpointType !== 'default' ? o.checkpointType : undefined;
        const dest =
          o.output ??
          `${jobId}${kind === 'adapter' ? '-adapter' : ''}${step !== undefined ? `-step-${step}` : ''}.tar.zst`;
        const res = await client.request('GET', '/v1/finetune/download', {
          query: { ft_id: jobId, checkpoint: kind, checkpoint_step: step },
          headers: { accept: 'application/zstd, application/json' },
        });
        const written = await saveResponse(res, dest, `Downloading ${jobId}`);
        out.result(
          { id: jobId, checkpoint: kind ?? 'default', checkpoint_step: step ?? null, output: dest, bytes: written },
          () => print(`Wrote ${dest} (${bytes(written)}).`),
        );
      },
    );

  ft.command('download-tokenized-dataset')
    .description("Download the job's tokenized dataset archive (.tar.zst)")
    .argument('<job-id>')
    .option('-o, --output <path>', 'where to write it (default: <job-id>-tokenized-dataset.tar.zst)')
    .action(async (id: string, o: { output?: string }, cmd: Command) => {
      const { client, out } = context(cmd);
      const link = await client.get(`${jobPath(id)}/download-tokenized-dataset`);
      const dest = o.output ?? link.filename;
      const res = await client.request('GET', link.url, { auth: false, headers: { accept: '*/*' } });
      const written = await saveResponse(res, dest, `Downloading ${link.filename}`);
      out.result({ id, output: dest, bytes: written }, () => print(`Wrote ${dest} (${bytes(written)}).`));
    });
}
