/**
 * `gantry endpoints`, `gantry deployments` and `gantry models`: dedicated
 * endpoints and their deployments (the project-scoped /v2 API), and the
 * model registry they deploy from. `deploy` takes a model id (`ml_…`), or a
 * model's qualified name (`<project_slug>/<name>`, e.g. a fine-tune's
 * `model_object_name`) when exactly one model has it.
 */
import type { Command } from 'commander';
import { context, int, oneOf, type Context } from '../context';
import { CliError, EXIT, usageError } from '../errors';
import { details, print, table, time } from '../output';

type Obj = Record<string, any>;

async function projectPath(ctx: Context): Promise<string> {
  const me = await ctx.whoami();
  return `/v2/projects/${encodeURIComponent(me.project_id)}`;
}
const enc = encodeURIComponent;

/** Every model the project sees (its own and those its organization shares). */
async function allModels(ctx: Context): Promise<Obj[]> {
  const base = await projectPath(ctx);
  const models: Obj[] = [];
  let after: string | undefined;
  do {
    const page = await ctx.client.get<{ data: Obj[]; next_cursor: string | null }>(`${base}/models`, {
      limit: 100,
      after,
    });
    models.push(...page.data);
    after = page.next_cursor ?? undefined;
  } while (after);
  return models;
}

/** A model id from an id or a name: exactly one registered model must match, or a supported base model. */
export async function resolveModel(ctx: Context, ref: string): Promise<{ id: string; name: string }> {
  if (/^ml_/.test(ref)) return { id: ref, name: ref };
  const models = await allModels(ctx);
  let matches = models.filter((m) => m.name === ref);
  if (!matches.length && !ref.includes('/')) matches = models.filter((m) => String(m.name).split('/').pop() === ref);
  if (matches.length === 1) return { id: matches[0].id, name: matches[0].name };
  if (matches.length > 1) {
    throw usageError(
      `'${ref}' matches ${matches.length} models: ${matches.map((m) => `${m.name} (${m.id})`).join(', ')}. Deploy one by its id.`,
    );
  }
  try {
    const base = await ctx.client.get(`/v2/supported-models/${enc(ref)}`);
    return { id: base.id, name: base.name };
  } catch (err) {
    if (!(err instanceof CliError && err.exitCode === EXIT.NOT_FOUND)) throw err;
  }
  const similar = models.filter((m) => String(m.name).includes(ref.split('/').pop()!)).slice(0, 10);
  throw new CliError(
    `No model named '${ref}' in this project${similar.length ? `; similar: ${similar.map((m) => m.name).join(', ')}` : ' (`gantry models list` shows them)'}.`,
    EXIT.NOT_FOUND,
  );
}

function deploymentDetails(d: Obj): string {
  return details([
    ['ID', d.id],
    ['Name', d.name],
    ['Endpoint', d.endpointId],
    ['Model', `${d.model}${d.modelId && d.modelId !== d.model ? ` (${d.modelId})` : ''}`],
    ['Revision', d.modelRevisionId],
    ['Config', d.configId],
    ['State', d.status?.state],
    ['Message', d.status?.message],
    ['Replicas', `${d.status?.readyReplicas ?? 0} ready / ${d.desiredReplicas ?? 0} desired`],
    ['Autoscaling', `${d.autoscaling?.minReplicas ?? 1}-${d.autoscaling?.maxReplicas ?? '-'} replicas`],
    ['LoRA adapters', d.enableLora ? 'enabled' : 'no'],
    ['Traffic share', d.estimatedEffectiveTrafficShare],
    ['Created', time(d.createdAt)],
  ]);
}

function endpointDetails(e: Obj, slug: string): string {
  return [
    details([
      ['ID', e.id],
      ['Name', e.name],
      ['Call as', `${slug}/${e.name}`],
      ['Visibility', e.visibility],
      ['Active rollout', e.activeRolloutId],
      ['Created', time(e.createdAt)],
    ]),
    e.deployments?.length
      ? table(
          ['deployment', 'name', 'model', 'state', 'ready', 'desired', 'traffic'],
          e.deployments.map((d: Obj) => [
            d.id,
            d.name,
            d.model,
            d.state,
            d.readyReplicas,
            d.desiredReplicas,
            d.estimatedEffectiveTrafficShare,
          ]),
        )
      : 'No deployments.',
  ].join('\n');
}

interface DeployOptions {
  model: string;
  name: string;
  minReplicas?: number;
  maxReplicas?: number;
  config?: string;
  revision?: string;
  enableLora?: boolean;
  validateOnly?: boolean;
}

async function deploy(ctx: Context, endpoint: string, o: DeployOptions) {
  const base = await projectPath(ctx);
  const model = await resolveModel(ctx, o.model);
  if (model.name !== o.model) ctx.out.note(`Deploying ${model.name} (${model.id}).`);
  const min = o.minReplicas ?? 1;
  const body = JSON.parse(
    JSON.stringify({
      name: o.name,
      modelId: model.id,
      modelRevisionId: o.revision,
      autoscaling: { minReplicas: min, maxReplicas: o.maxReplicas ?? Math.max(min, 1) },
      configId: o.config,
      enableLora: o.enableLora,
      validateOnly: o.validateOnly,
    }),
  );
  const d = await ctx.client.post(`${base}/endpoints/${enc(endpoint)}/deployments`, body);
  ctx.out.result(d, () => print(deploymentDetails(d)));
}

const deployOptions = (c: Command) =>
  c
    .requiredOption('--model <model>', "a model id (ml_…), or a model's name (e.g. a fine-tune's model_object_name)")
    .requiredOption('--name <name>', 'deployment name (lowercase letters, digits and dashes)')
    .option('--min-replicas <n>', 'default 1; 0 scales to zero when idle', int(0, 100))
    .option('--max-replicas <n>', 'default: --min-replicas (at least 1)', int(0, 100))
    .option('--config <cr_id>', 'deployment profile (needed when the model family has several)')
    .option('--revision <rv_id>', 'a model revision (default: the newest)')
    .option('--enable-lora', 'allow LoRA adapters to be attached')
    .option('--validate-only', 'check the request; create nothing');

export function addEndpointCommands(program: Command) {
  const endpoints = program.command('endpoints').description('Dedicated inference endpoints');

  endpoints
    .command('list')
    .description("The project's endpoints")
    .action(async (_o, cmd: Command) => {
      const ctx = context(cmd);
      const base = await projectPath(ctx);
      const data: Obj[] = [];
      let after: string | undefined;
      do {
        const page = await ctx.client.get(`${base}/endpoints`, { limit: 100, after });
        data.push(...page.data);
        after = page.next_cursor ?? undefined;
      } while (after);
      const slug = (await ctx.whoami()).project_slug;
      ctx.out.result({ object: 'list', data }, () =>
        print(
          data.length
            ? table(
                ['id', 'name', 'call as', 'deployments', 'visibility', 'created'],
                data.map((e) => [
                  e.id,
                  e.name,
                  `${slug}/${e.name}`,
                  e.deployments.length,
                  e.visibility,
                  time(e.createdAt),
                ]),
              )
            : 'No endpoints.',
        ),
      );
    });

  endpoints
    .command('get')
    .alias('retrieve')
    .description('An endpoint (by id or name) with its deployments')
    .argument('<endpoint>')
    .action(async (endpoint: string, _o, cmd: Command) => {
      const ctx = context(cmd);
      const e = await ctx.client.get(`${await projectPath(ctx)}/endpoints/${enc(endpoint)}`);
      const slug = (await ctx.whoami()).project_slug;
      ctx.out.result(e, () => print(endpointDetails(e, slug)));
    });

  endpoints
    .command('create')
    .description('Create an endpoint (then deploy a model to it)')
    .argument('<name>', 'lowercase letters, digits and dashes')
    .option(
      '--visibility <v>',
      'VISIBILITY_PRIVATE or VISIBILITY_INTERNAL',
      oneOf('VISIBILITY_PRIVATE', 'VISIBILITY_INTERNAL'),
    )
    .action(async (name: string, o: { visibility?: string }, cmd: Command) => {
      const ctx = context(cmd);
      const e = await ctx.client.post(
        `${await projectPath(ctx)}/endpoints`,
        JSON.parse(JSON.stringify({ name, visibility: o.visibility })),
      );
      const slug = (await ctx.whoami()).project_slug;
      ctx.out.result(e, () => print(endpointDetails(e, slug)));
    });

  endpoints
    .command('delete')
    .description('Delete an endpoint that has no deployments left')
    .argument('<endpoint>')
    .action(async (endpoint: string, _o, cmd: Command) => {
      const ctx = context(cmd);
      const res = await ctx.client.delete(`${await projectPath(ctx)}/endpoints/${enc(endpoint)}`);
      ctx.out.result(res ?? {}, () => print(`Deleted endpoint ${endpoint}.`));
    });

  endpoints
    .command('events')
    .description("An endpoint's events across its deployments, newest first")
    .argument('<endpoint>')
    .option('--limit <n>', 'at most this many (default 100)', int(1, 500))
    .action(async (endpoint: string, o: { limit?: number }, cmd: Command) => {
      const ctx = context(cmd);
      const res = await ctx.client.get(`${await projectPath(ctx)}/endpoints/${enc(endpoint)}/events`, {
        limit: o.limit,
      });
      ctx.out.result(res, () =>
        print(
          table(
            ['time', 'level', 'type', 'deployment', 'message'],
            res.data.map((e: Obj) => [time(e.createdAt), e.level, e.type, e.deploymentId, e.message]),
          ),
        ),
      );
    });

  deployOptions(
    endpoints
      .command('deploy')
      .description('Deploy a model behind an endpoint')
      .argument('<endpoint>', 'endpoint id or name'),
  ).action(async (endpoint: string, o: DeployOptions, cmd: Command) => deploy(context(cmd), endpoint, o));

  const deployments = program.command('deployments').description("An endpoint's deployments");
  const endpointOpt = (c: Command) => c.requiredOption('--endpoint <endpoint>', 'endpoint id or name');

  endpointOpt(deployments.command('list').description("An endpoint's deployments")).action(
    async (o: { endpoint: string }, cmd: Command) => {
      const ctx = context(cmd);
      const res = await ctx.client.get(`${await projectPath(ctx)}/endpoints/${enc(o.endpoint)}/deployments`);
      ctx.out.result(res, () =>
        print(
          res.data.length
            ? table(
                ['id', 'name', 'model', 'state', 'ready', 'desired', 'traffic', 'created'],
                res.data.map((d: Obj) => [
                  d.id,
                  d.name,
                  d.model,
                  d.status?.state,
                  d.status?.readyReplicas,
                  d.desiredReplicas,
                  d.estimatedEffectiveTrafficShare,
                  time(d.createdAt),
                ]),
              )
            : 'No deployments.',
        ),
      );
    },
  );

  deployOptions(endpointOpt(deployments.command('create').description('Deploy a model behind an endpoint'))).action(
    async (o: DeployOptions & { endpoint: string }, cmd: Command) => deploy(context(cmd), o.endpoint, o),
  );

  endpointOpt(deployments.command('get').alias('retrieve').description('A deployment').argument('<deployment>')).action(
    async (id: string, o: { endpoint: string }, cmd: Command) => {
      const ctx = context(cmd);
      const d = await ctx.client.get(`${await projectPath(ctx)}/endpoints/${enc(o.endpoint)}/deployments/${enc(id)}`);
      ctx.out.result(d, () => print(deploymentDetails(d)));
    },
  );

  endpointOpt(
    deployments
      .command('update')
      .description('Change replica bounds (0 and 0 pause a deployment)')
      .argument('<deployment>')
      .option('--min-replicas <n>', 'least replicas', int(0, 100))
      .option('--max-replicas <n>', 'most replicas', int(0, 100)),
  ).action(async (id: string, o: { endpoint: string; minReplicas?: number; maxReplicas?: number }, cmd: Command) => {
    const ctx = context(cmd);
    if (o.minReplicas === undefined && o.maxReplicas === undefined)
      throw usageError('Nothing to update: give --min-replicas and/or --max-replicas.');
    const path = `${await projectPath(ctx)}/endpoints/${enc(o.endpoint)}/deployments/${enc(id)}`;
    const current = await ctx.client.get(path);
    const d = await ctx.client.patch(path, {
      autoscaling: {
        ...current.autoscaling,
        ...(o.minReplicas !== undefined ? { minReplicas: o.minReplicas } : {}),
        ...(o.maxReplicas !== undefined ? { maxReplicas: o.maxReplicas } : {}),
      },
    });
    ctx.out.result(d, () => print(deploymentDetails(d)));
  });

  endpointOpt(deployments.command('delete').description('Delete a deployment').argument('<deployment>')).action(
    async (id: string, o: { endpoint: string }, cmd: Command) => {
      const ctx = context(cmd);
      const res = await ctx.client.delete(
        `${await projectPath(ctx)}/endpoints/${enc(o.endpoint)}/deployments/${enc(id)}`,
      );
      ctx.out.result(res ?? {}, () => print(`Deleting deployment ${id}.`));
    },
  );

  const models = program.command('models').description('The model registry (what deployments deploy)');
  models
    .command('list')
    .description("The project's models and those its organization shares, newest first")
    .action(async (_o, cmd: Command) => {
      const ctx = context(cmd);
      const data = await allModels(ctx);
      ctx.out.result({ object: 'list', data }, () =>
        print(
          data.length
            ? table(
                ['id', 'name', 'type', 'base model', 'parameters', 'created'],
                data.map((m) => [
                  m.id,
                  m.name,
                  String(m.weights?.type ?? '').replace('WEIGHTS_TYPE_', ''),
                  m.baseModelId,
                  m.weights?.parameters?.total,
                  time(m.createdAt),
                ]),
              )
            : 'No models.',
        ),
      );
    });
  models
    .command('get')
    .alias('retrieve')
    .description('A model, by id or name')
    .argument('<model>')
    .action(async (ref: string, _o, cmd: Command) => {
      const ctx = context(cmd);
      const m = await ctx.client.get(`${await projectPath(ctx)}/models/${enc(ref)}`);
      ctx.out.result(m, () =>
        print(
          details([
            ['ID', m.id],
            ['Name', m.name],
            ['Type', m.weights?.type],
            ['Base model', m.baseModelId],
            ['Parameters', m.weights?.parameters?.total],
            ['Visibility', m.visibility],
            ['Description', m.description],
            ['Created', time(m.createdAt)],
          ]),
        ),
      );
    });
}
