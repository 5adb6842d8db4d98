/**
 * How a remote model upload is shown (the official SDK's beta.models.uploads).
 */
import type { UploadRow } from '../../db/model-uploads';

export const toUpload = (u: UploadRow) => ({
  id: u.id,
  createdAt: new Date(u.created_at).toISOString(),
  modelId: u.model_id,
  projectId: u.project_id,
  remoteUrl: u.remote_url,
  status: u.status,
  maxRestarts: u.max_restarts,
  restartCount: u.restart_count,
  ...(u.status_message ? { statusMessage: u.status_message } : {}),
  ...(u.revision_id ? { revisionId: u.revision_id } : {}),
  updatedAt: new Date(u.updated_at).toISOString(),
});
