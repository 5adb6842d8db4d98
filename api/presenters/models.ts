/**
 * How a registry model is shown (the official SDK's beta.models), under its qualified name, with
 * its revisions and a revision's files.
 */
import { qualifiedModelName, type listRevisionFiles, type RegistryModelRow, type RevisionRow } from '../../db/models';

export function toModel(m: RegistryModelRow) {
  return {
    id: m.id,
    name: qualifiedModelName(m),
    organizationId: m.organization_id,
    projectId: m.project_id,
    visibility: m.visibility,
    weights: {
      type: m.weights_type,
      ...(m.architecture ? { architecture: m.architecture } : {}),
      ...(m.context_length ? { contextLength: String(m.context_length) } : {}),
      ...(m.parameters_total ? { parameters: { total: String(m.parameters_total), byDtype: [] } } : {}),
    },
    ...(m.base_model ? { baseModelId: m.base_model } : {}),
    ...(m.description ? { description: m.description } : {}),
    createdAt: new Date(m.created_at).toISOString(),
    updatedAt: new Date(m.updated_at).toISOString(),
  };
}

export const toModelRevision = (r: RevisionRow) => ({
  revisionId: r.id,
  createdAt: new Date(r.created_at).toISOString(),
  validationStatus: r.validation_status,
});

type RevisionFileRow = Awaited<ReturnType<typeof listRevisionFiles>>[number];

/** A revision's files (none when the model has no revision yet), with sizes and SHA-256, and their total size. */
export function toModelFiles(revision: RevisionRow | undefined, files: RevisionFileRow[]) {
  return {
    object: 'list' as const,
    data: files.map((f) => ({ path: f.path, sizeBytes: String(f.size_bytes), hash: `sha256:${f.sha256}` })),
    ...(revision ? { revisionId: revision.id, revisionCreatedAt: new Date(revision.created_at).toISOString() } : {}),
    totalSizeBytes: String(files.reduce((n, f) => n + Number(f.size_bytes), 0)),
    next_cursor: null,
  };
}
