/**
 * The platform's serverless pools: for each catalog model offered serverless (one with serverless
 * prices, fine-tunes/models.ts) whose model server this installation can run (planServing), one
 * container deployment of that model server, owned by the platform's own project
 * (shared/serverless.ts, db/platform-account.ts). The API process makes them when it starts, as it
 * makes the usage schedule: idempotently (a pool that exists is left running, and sent the
 * current spec if an upgrade changed it, without waiting for the answer), so any number of API
 * processes may start at once. From then on each pool is an ordinary container deployment, kept by its entity workflow: durable
 * across restarts, scaled by the gateway's request counts (HTTPTotalRequests) from zero, which is
 * where an idle pool goes.
 *
 * The gateway routes a call whose `model` is the catalog model's name to its pool
 * (gateway/inference.ts); `GET /v1/models` lists the models that have one (routes/model-catalog.ts).
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { deploymentWorkflowId, type DeploymentSpec } from '../shared/deployments';
import { PLATFORM_PROJECT_ID, PLATFORM_PROJECT_SLUG, serverlessPoolName } from '../shared/serverless';
import { getDeployment, listDeployments } from '../db/deployments';
import { ensurePlatformProject } from '../db/platform-account';
import type { Queryable } from '../db/pool';
import { serverlessModels, type FineTuneModel } from '../fine-tunes/models';
import type { GantryConfig } from '../platform/config';
import { updateDeploymentUpdate } from '../workflows/deployments';
import type { ApiDeps } from './deps';
import { modelServerSpec, planServing, type ServingPlan } from './endpoint-serving';
import { resumeEndedDeployment, startContainerDeployment } from './use-cases/container-deployments';
import { executeEntityUpdate } from './workflows';

/** Requests a minute one replica of a pool takes before the autoscaler adds another (as an endpoint's default). */
const REQUESTS_PER_REPLICA_MINUTE = 60;

/** The container deployment of a catalog model's pool. */
export function serverlessPoolSpec(
  config: GantryConfig,
  model: string,
  plan: Extract<ServingPlan, { servable: true }>,
): DeploymentSpec {
  const spec = modelServerSpec(config, {
    containerName: serverlessPoolName(model),
    plan,
    autoscaling: { minReplicas: 0, maxReplicas: config.serverless.maxReplicas },
  });
  return {
    ...spec,
    description: `Serverless pool for ${model}`,
    // The gateway's count covers the last minute already; the window asks for the rest of the idle
    // time on top of it, so the pool goes to zero after GANTRY_SERVERLESS_IDLE_MINUTES without a request.
    autoscaling: {
      metric: 'HTTPTotalRequests',
      target: REQUESTS_PER_REPLICA_MINUTE,
      time_interval_minutes: config.serverless.idleMinutes - 1,
    },
  };
}

/** Makes (or brings up to date) the pool of every catalog model this installation can serve serverless. */
export async function ensureServerlessPools(
  deps: Pick<ApiDeps, 'db' | 'temporal' | 'config' | 'logger'>,
): Promise<Array<{ model: string; deploymentId: string }>> {
  const { db, temporal, config, logger } = deps;
  await ensurePlatformProject(db);
  const pools: Array<{ model: string; deploymentId: string }> = [];
  for (const model of serverlessModels()) {
    const plan = await planServing(db, PLATFORM_PROJECT_ID, model.name);
    if (!plan?.servable) {
      logger.info({ model: model.name, reason: plan?.reason }, 'no serverless pool: its model server cannot run here');
      continue;
    }
    const spec = serverlessPoolSpec(config, model.name, plan);
    const existing = await getDeployment(db, PLATFORM_PROJECT_ID, spec.name);
    if (existing) {
      // Its workflow ended (terminated from the Temporal UI, or failed): nobody else brings a pool back.
      if (!(await workflowRunning(temporal, deploymentWorkflowId(existing.id))))
        await resumeEndedDeployment(deps, existing);
      if (JSON.stringify(existing.state.spec) !== JSON.stringify(spec))
        bringToSpec(deps, existing.id, model.name, spec);
      pools.push({ model: model.name, deploymentId: existing.id });
      continue;
    }
    try {
      const id = await startContainerDeployment(deps, {
        projectId: PLATFORM_PROJECT_ID,
        projectSlug: PLATFORM_PROJECT_SLUG,
        apiKeyId: 'none (the platform keeps its serverless pools)',
        spec,
        ceilingParam: 'GANTRY_SERVERLESS_MAX_REPLICAS',
      });
      pools.push({ model: model.name, deploymentId: id });
    } catch (err) {
      // Another API process made it a moment ago: (project, name) is unique.
      if ((err as { code?: string }).code !== '23505') throw err;
      pools.push({ model: model.name, deploymentId: (await getDeployment(db, PLATFORM_PROJECT_ID, spec.name))!.id });
    }
  }
  return pools;
}

/**
 * Sends a pool's deployment its current spec, without waiting: the Update is answered by the
 * deployment's worker, which may start after the API or be down, and the API's start must not wait
 * on it (it did, for the Update's whole deadline). Until the answer the pool serves as it was; a
 * failure is logged, and the next start sends it again.
 */
function bringToSpec(
  deps: Pick<ApiDeps, 'temporal' | 'logger'>,
  deploymentId: string,
  model: string,
  spec: DeploymentSpec,
) {
  const { name: _name, ...rest } = spec;
  executeEntityUpdate(deps.temporal, deploymentWorkflowId(deploymentId), updateDeploymentUpdate, [rest]).then(
    () => deps.logger.info({ model, deploymentId }, 'serverless pool brought to the current spec'),
    (err: unknown) =>
      deps.logger.warn(
        { model, deploymentId, err: (err as Error).message },
        'serverless pool not brought to the current spec; the next start sends it again',
      ),
  );
}

async function workflowRunning(temporal: ApiDeps['temporal'], workflowId: string): Promise<boolean> {
  try {
    return (await temporal.workflow.getHandle(workflowId).describe()).status.name === 'RUNNING';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/** The catalog models that have a pool now: what a serverless call can reach. */
export async function pooledServerlessModels(db: Queryable): Promise<FineTuneModel[]> {
  const names = new Set((await listDeployments(db, PLATFORM_PROJECT_ID, undefined, 1000)).map((d) => d.name));
  return serverlessModels().filter((m) => names.has(serverlessPoolName(m.name)));
}
