/** The model registry's lookups that more than one route needs. */
import { findRegistryModelsByName, getRegistryModel, type RegistryModelRow } from '../../db/models';
import type { Queryable } from '../../db/pool';
import { notFound } from '../errors';

/** A model of the project by its id, or its bare or project-qualified name; else 404. */
export async function requireOwnModel(db: Queryable, projectId: string, idOrName: string): Promise<RegistryModelRow> {
  const byId = await getRegistryModel(db, projectId, idOrName);
  if (byId) return byId;
  const byName = await findRegistryModelsByName(db, projectId, idOrName);
  if (byName.length === 1) return byName[0];
  throw notFound(`Model '${idOrName}' not found in this project.`);
}
