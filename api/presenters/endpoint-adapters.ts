/**
 * How a LoRA adapter attached to an endpoint deployment is shown (the SDK's beta.endpoints.adapters),
 * with its desired and realized revisions as resource names.
 */
import type { AdapterRow } from '../../db/endpoint-adapters';

export function toAdapter(a: AdapterRow, projectId: string) {
  const adapterModel = `projects/${projectId}/models/${a.adapter_model_id}`;
  return {
    id: a.adapter_model_id,
    adapterModelId: a.adapter_model_id,
    adapterModel,
    desiredRevisionId: a.desired_revision_id,
    desiredRevision: `${adapterModel}/revisions/${a.desired_revision_id}`,
    etag: a.etag,
    adapterValid: a.adapter_valid,
    ...(a.adapter_valid_reason ? { adapterValidReason: a.adapter_valid_reason } : {}),
    perCluster: [
      {
        clusterId: a.cluster_id,
        adapterModelId: a.adapter_model_id,
        adapterModel,
        state: a.state,
        readyPodCount: a.ready_pods,
        failedPodCount: a.failed_pods,
        totalPodCount: a.total_pods,
        adapterValid: a.adapter_valid,
        ...(a.adapter_valid_reason ? { adapterValidReason: a.adapter_valid_reason } : {}),
        ...(a.realized_revision_id
          ? {
              realizedRevisionId: a.realized_revision_id,
              realizedRevision: `${adapterModel}/revisions/${a.realized_revision_id}`,
            }
          : {}),
        ...(a.realized_etag ? { realizedEtag: a.realized_etag } : {}),
        ...(a.reason ? { reason: a.reason } : {}),
        ...(a.message ? { message: a.message } : {}),
        ...(a.loaded_at ? { loadedAt: new Date(a.loaded_at).toISOString() } : {}),
        updatedAt: new Date(a.updated_at).toISOString(),
      },
    ],
  };
}
