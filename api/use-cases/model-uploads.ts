/**
 * Creating a remote model upload: the model it goes into, the URL checked (http or https; public
 * hosts unless the installation allows private ones; the worker checks again on every redirect),
 * its row (a `token` sealed at rest), then its workflow `model-upload/<id>` (the row goes again if
 * the workflow cannot start).
 */
import type { z } from 'zod';
import type { Principal } from '../../db/accounts';
import { deleteUploadRow, getUpload, insertUpload, type UploadRow } from '../../db/model-uploads';
import { findRegistryModelsByName, getRegistryModel } from '../../db/models';
import { SEALED_COLUMNS, sealForRow } from '../../db/sealed-values';
import { newId } from '../../platform/ids';
import { checkRemoteUrl, RemoteFetchRefused } from '../../providers/remote/fetch-remote';
import { modelUploadWorkflowId } from '../../shared/model-file-uploads';
import { modelUpload } from '../../workflows/model-uploads';
import type { ApiDeps } from '../deps';
import { badRequest } from '../errors';
import type { CreateModelUploadBody } from '../schemas/models';
import { startResourceWorkflowOrUndo } from '../workflows';

/** Attempts after the first that an import gets (a lost worker, a dropped connection). */
const MAX_RESTARTS = 3;

/** Creates a remote upload (pending) and starts its import; its row. */
export async function createModelUpload(
  deps: Pick<ApiDeps, 'db' | 'temporal' | 'config'>,
  principal: Principal,
  body: z.infer<typeof CreateModelUploadBody>,
): Promise<UploadRow> {
  const { db, temporal, config } = deps;
  const model =
    (await getRegistryModel(db, principal.projectId, body.modelId)) ??
    (await findRegistryModelsByName(db, principal.projectId, body.modelId))[0];
  if (!model) throw badRequest(`Model '${body.modelId}' is not registered in this project.`, 'modelId');
  try {
    await checkRemoteUrl(body.remoteUrl, config.remoteFetch);
  } catch (err) {
    if (err instanceof RemoteFetchRefused) throw badRequest(err.message, 'remoteUrl');
    throw badRequest(`The host of remoteUrl could not be resolved: ${(err as Error).message}`, 'remoteUrl');
  }
  if (body.token && !config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
  const id = newId('mu', '_');
  await insertUpload(db, {
    id,
    projectId: principal.projectId,
    modelId: model.id,
    remoteUrl: body.remoteUrl,
    sealedToken: body.token
      ? sealForRow(
          config.keyring!,
          SEALED_COLUMNS.registryUploadToken,
          { id, projectId: principal.projectId },
          body.token,
        )
      : undefined,
    maxRestarts: MAX_RESTARTS,
  });
  await startResourceWorkflowOrUndo(
    temporal,
    {
      workflow: modelUpload,
      workflowId: modelUploadWorkflowId(id),
      args: [{ uploadId: id, modelId: model.id, maxRestarts: MAX_RESTARTS }],
      projectId: principal.projectId,
      resourceType: 'model-upload',
      resourceId: id,
      status: 'REMOTE_UPLOAD_STATUS_PENDING',
      summary: `Upload into ${model.id} from ${new URL(body.remoteUrl).host}`,
      details: `Created by API key \`${principal.apiKeyId}\`.`,
    },
    () => deleteUploadRow(db, id),
  );
  return (await getUpload(db, principal.projectId, id))!;
}
