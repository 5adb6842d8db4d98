/**
 * Evaluations: creating one (its file, templates and external URLs checked, external tokens
 * sealed, its row, its workflow `evaluation/<id>`). Its rows are read and judged by the workflow's
 * activities (activities/evaluations.ts).
 */
import type { z } from 'zod';
import type { Principal } from '../../db/accounts';
import { deleteEvaluationRow, insertEvaluation } from '../../db/evaluations';
import { getFile } from '../../db/files';
import { newId } from '../../platform/ids';
import { checkRemoteUrl, RemoteFetchRefused } from '../../providers/remote/fetch-remote';
import {
  candidateRoles,
  EVALUATION_RESOURCE_TYPE,
  evaluationWorkflowId,
  type EvaluationParameters,
} from '../../shared/evaluations';
import { templateError } from '../../shared/row-templates';
import { evaluation as evaluationWorkflow } from '../../workflows/evaluations';
import type { ApiDeps } from '../deps';
import { badRequest } from '../errors';
import type { CreateEvaluationBody } from '../schemas/evaluations';
import { startResourceWorkflowOrUndo } from '../workflows';

/** Rows one activity of the workflow judges. */
const SLICE_ROWS = 200;

/** Where an external token is sealed: bound to its evaluation and role, it opens nowhere else. */
export const sealedTokenPlace = (evaluationId: string, role: string) => `evaluation/${evaluationId}/${role}`;

/** Throws a 400 naming `param` unless `text` is a Jinja2 template. */
function checkTemplate(text: string | undefined, param: string): void {
  const error = text ? templateError(text) : null;
  if (error) throw badRequest(`Not a valid Jinja2 template: ${error}`, param);
}

/** A model that is called, with what its source needs: an external one its public URL and token. */
async function checkModel(
  deps: Pick<ApiDeps, 'config'>,
  m: { model_source: string; external_base_url?: string; external_api_token?: string },
  param: string,
): Promise<void> {
  if (m.model_source !== 'external') {
    if (m.external_base_url || m.external_api_token)
      throw badRequest(
        'external_base_url and external_api_token go with model_source external.',
        `${param}.model_source`,
      );
    return;
  }
  if (!m.external_base_url)
    throw badRequest('model_source external needs external_base_url.', `${param}.external_base_url`);
  if (!m.external_api_token)
    throw badRequest('model_source external needs external_api_token.', `${param}.external_api_token`);
  try {
    await checkRemoteUrl(m.external_base_url, deps.config.remoteFetch);
  } catch (err) {
    if (err instanceof RemoteFetchRefused) throw badRequest(err.message, `${param}.external_base_url`);
    throw err;
  }
}

/** Creates an evaluation (pending) and starts its workflow; its id. */
export async function createEvaluation(
  deps: Pick<ApiDeps, 'db' | 'temporal' | 'config'>,
  principal: Principal,
  body: z.infer<typeof CreateEvaluationBody>,
): Promise<string> {
  const { db, temporal, config } = deps;
  const p = body.parameters as EvaluationParameters;
  const file = await getFile(db, principal.projectId, p.input_data_file_path);
  if (!file)
    throw badRequest(
      `No file '${p.input_data_file_path}' in this project.`,
      'parameters.input_data_file_path',
      'file_not_found',
    );
  if (file.purpose !== 'eval')
    throw badRequest(
      `File '${file.id}' has purpose '${file.purpose}'; an evaluation's input is a file of purpose 'eval'.`,
      'parameters.input_data_file_path',
    );
  if (!file.uploaded_at)
    throw badRequest(`File '${file.id}' has not finished uploading.`, 'parameters.input_data_file_path');

  if (body.type === 'classify') {
    const missing = p.pass_labels!.find((l) => !p.labels!.includes(l));
    if (missing !== undefined) throw badRequest(`'${missing}' is not one of labels.`, 'parameters.pass_labels');
  }
  if (body.type === 'score') {
    if (!(p.min_score! < p.max_score!)) throw badRequest('max_score must be above min_score.', 'parameters.max_score');
    if (p.pass_threshold! < p.min_score! || p.pass_threshold! > p.max_score!)
      throw badRequest('pass_threshold must be within min_score to max_score.', 'parameters.pass_threshold');
  }
  checkTemplate(p.judge.system_template, 'parameters.judge.system_template');
  await checkModel(deps, p.judge, 'parameters.judge');
  for (const role of candidateRoles(body.type)) {
    const c = p[role];
    if (c === undefined || typeof c === 'string') continue;
    checkTemplate(c.system_template, `parameters.${role}.system_template`);
    checkTemplate(c.input_template, `parameters.${role}.input_template`);
    await checkModel(deps, c, `parameters.${role}`);
  }
  if (!config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');

  const id = newId('eval');
  // Each external token sealed for its evaluation and role; the stored parameters keep none.
  const sealed: Record<string, string> = {};
  const stored = structuredClone(p) as unknown as Record<string, Record<string, unknown> | unknown>;
  for (const role of ['judge', ...candidateRoles(body.type)]) {
    const m = stored[role];
    if (!m || typeof m !== 'object') continue;
    const holder = m as Record<string, unknown>;
    if (typeof holder.external_api_token === 'string') {
      sealed[role] = config.keyring.seal(holder.external_api_token, sealedTokenPlace(id, role)).toString('base64');
      delete holder.external_api_token;
    }
  }
  await insertEvaluation(db, {
    id,
    project_id: principal.projectId,
    api_key_id: principal.apiKeyId,
    user_id: principal.userId,
    type: body.type,
    parameters: stored as Record<string, unknown>,
    sealed_tokens: sealed,
  });
  await startResourceWorkflowOrUndo(
    temporal,
    {
      workflow: evaluationWorkflow,
      workflowId: evaluationWorkflowId(id),
      args: [{ evaluationId: id, projectId: principal.projectId, apiKeyId: principal.apiKeyId, sliceRows: SLICE_ROWS }],
      projectId: principal.projectId,
      resourceType: EVALUATION_RESOURCE_TYPE,
      resourceId: id,
      status: 'pending',
      summary: `${body.type} evaluation of ${file.filename}`,
      details: `Created by API key \`${principal.apiKeyId}\`; judge ${p.judge.model} (${p.judge.model_source}).`,
    },
    () => deleteEvaluationRow(db, id),
  );
  return id;
}
