/**
 * How a registry model is shown (the official SDK's beta.models), under its qualified name.
 */
import { qualifiedModelName, type RegistryModelRow } from '../../db/models';

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
