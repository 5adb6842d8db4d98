/**
 * How a deployment profile is shown (the official SDK's beta.models.configs).
 */
import type { ModelConfigRow } from '../../db/model-configs';
import { catalogModelId } from '../../fine-tunes/models';
import { PUBLIC_PROJECT } from '../route';

/** A deployment profile as the SDK reads it; the installation's own (public) profiles name project `public`. */
export function toConfig(c: ModelConfigRow) {
  return {
    id: c.id,
    projectId: c.project_id ?? PUBLIC_PROJECT,
    referenceModel: `projects/${PUBLIC_PROJECT}/models/${catalogModelId(c.family)}`,
    referenceModelId: catalogModelId(c.family),
    selectors: c.selectors,
    // No certification runs on this installation: none is claimed.
    certifications: [],
  };
}
