/**
 * The write paths of the model registry (registering a model by hand, changing its name,
 * description or visibility, deleting it with its files), and the lookup its routes share.
 */
import type { Principal } from '../../db/accounts';
import {
  deleteRegistryModel,
  findRegistryModelsByName,
  getRegistryModel,
  insertRegistryModel,
  updateRegistryModel,
  type RegistryModelRow,
} from '../../db/models';
import type { Queryable } from '../../db/pool';
import { findCatalogModel } from '../../fine-tunes/models';
import { newId } from '../../platform/ids';
import { deleteScheduledBlobs } from '../../providers/storage/blob-deletions';
import type { ApiDeps } from '../deps';
import { badRequest, conflict, notFound } from '../errors';
import { BareName, type CreateModelInput } from '../schemas/models';

/** A model of the project by its id, or its bare or project-qualified name; else 404. */
export async function requireOwnModel(db: Queryable, projectId: string, idOrName: string): Promise<RegistryModelRow> {
  const byId = await getRegistryModel(db, projectId, idOrName);
  if (byId) return byId;
  const byName = await findRegistryModelsByName(db, projectId, idOrName);
  if (byName.length === 1) return byName[0];
  throw notFound(`Model '${idOrName}' not found in this project.`);
}

/** `name` bare, or qualified with the key's project slug. */
function bareName(principal: Principal, name: string, param: string): string {
  const slash = name.indexOf('/');
  const bare = slash < 0 ? name : name.slice(slash + 1);
  if (slash >= 0 && name.slice(0, slash) !== principal.projectSlug) {
    throw badRequest(`A qualified name must start with this project's slug '${principal.projectSlug}/'.`, param);
  }
  if (!BareName.test(bare)) {
    throw badRequest('A model name is letters, digits, dots, dashes and underscores (at most 128).', param);
  }
  return bare;
}

const WEIGHT_TYPES: Record<CreateModelInput['type'], 'WEIGHTS_TYPE_DEFAULT' | 'WEIGHTS_TYPE_ADAPTER'> = {
  model: 'WEIGHTS_TYPE_DEFAULT',
  models: 'WEIGHTS_TYPE_DEFAULT',
  adapter: 'WEIGHTS_TYPE_ADAPTER',
  adapters: 'WEIGHTS_TYPE_ADAPTER',
};
const UPDATABLE = ['name', 'description', 'visibility'] as const;

/** Registers a model of the project; its weights come later, from a remote upload or a fine-tune's outputs. */
export async function createRegistryModel(
  { db }: Pick<ApiDeps, 'db'>,
  principal: Principal,
  body: CreateModelInput,
): Promise<RegistryModelRow> {
  const weightsType = WEIGHT_TYPES[body.type];
  const name = bareName(principal, body.name, 'name');
  const base = findCatalogModel(body.baseModelId);
  if (!base) {
    throw badRequest(
      `Unknown base model '${body.baseModelId}'. GET /v2/supported-models lists the base models of this installation.`,
      'baseModelId',
    );
  }
  if ((await findRegistryModelsByName(db, principal.projectId, name)).length)
    throw conflict(`A model named '${principal.projectSlug}/${name}' exists in this project.`, 'model_exists');
  const id = newId('ml', '_');
  await insertRegistryModel(db, {
    id,
    projectId: principal.projectId,
    name,
    description: body.description,
    weightsType,
    baseModel: base.name,
  });
  return (await getRegistryModel(db, principal.projectId, id))!;
}

/** Sets the fields `updateMask` names (comma-separated; without it, every mutable field) from the body. */
export async function changeRegistryModel(
  { db }: Pick<ApiDeps, 'db'>,
  principal: Principal,
  model: RegistryModelRow,
  body: { name?: string; description?: string; visibility?: RegistryModelRow['visibility'] },
  updateMask: string | undefined,
): Promise<RegistryModelRow> {
  const mask = updateMask ? updateMask.split(',').map((f) => f.trim()) : [...UPDATABLE];
  for (const f of mask) {
    if (!(UPDATABLE as readonly string[]).includes(f))
      throw badRequest(`updateMask names '${f}', which is not one of ${UPDATABLE.join(', ')}.`, 'updateMask');
  }
  const set: Parameters<typeof updateRegistryModel>[2] = {};
  // Without a mask every mutable field is set from the body; a name is never cleared.
  if (mask.includes('name') && body.name !== undefined) {
    set.name = bareName(principal, body.name, 'name');
    const clash = await findRegistryModelsByName(db, principal.projectId, set.name);
    if (clash.some((c) => c.id !== model.id))
      throw conflict(`A model named '${principal.projectSlug}/${set.name}' exists in this project.`, 'model_exists');
  }
  if (mask.includes('description')) set.description = body.description ?? null;
  if (mask.includes('visibility')) set.visibility = body.visibility ?? 'VISIBILITY_PRIVATE';
  await updateRegistryModel(db, model.id, set);
  return (await getRegistryModel(db, principal.projectId, model.id))!;
}

/**
 * Deletes a model, its revisions and their files: the rows go first, so nothing can reach a file
 * while it is deleted. Answers the files not deleted yet (the blob deletion rounds retry them).
 */
export async function deleteRegistryModelAndFiles(
  { db, blobs }: Pick<ApiDeps, 'db' | 'blobs'>,
  model: RegistryModelRow,
) {
  const keys = await deleteRegistryModel(db, model.id);
  return deleteScheduledBlobs(db, blobs, keys);
}
