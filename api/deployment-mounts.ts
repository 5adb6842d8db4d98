/**
 * What a container deployment mounts, checked and pinned at deploy and update:
 * volumes (a version of a deployment volume) and model mounts (a revision of a
 * registered model's files). Each is pinned, the current version or newest
 * usable revision unless named, so every replica of a revision sees the same
 * files. Mount paths are absolute, plain and do not overlap, nor overlap
 * ADAPTERS_MOUNT_PATH, which every replica has.
 */
import { ADAPTERS_MOUNT_PATH, type DeploymentSpec } from '../shared/deployments';
import { getVolume, getVolumeVersion } from '../db/deployment-volumes';
import type { Queryable } from '../db/pool';
import { findRegistryModelsByName, getRegistryModel, listRevisions } from '../db/models';
import { isSafeVolumePath } from '../providers/containers/volume-store';
import { badRequest } from './errors';

type Volumes = NonNullable<DeploymentSpec['volumes']>;
type ModelMounts = NonNullable<DeploymentSpec['model_mounts']>;

function checkMountPaths(spec: { volumes?: Volumes; model_mounts?: ModelMounts }) {
  // Every replica has its deployment's adapters mounted there (providers/containers/adapter-files.ts).
  const seen: string[] = [ADAPTERS_MOUNT_PATH];
  const all = [
    ...(spec.volumes ?? []).map((m, i) => ({ path: m.mount_path, param: `volumes[${i}].mount_path` })),
    ...(spec.model_mounts ?? []).map((m, i) => ({ path: m.mount_path, param: `model_mounts[${i}].mount_path` })),
  ];
  for (const { path, param } of all) {
    const segments = path.split('/').slice(1);
    if (!path.startsWith('/') || !segments.length || !segments.every((s) => isSafeVolumePath(s))) {
      throw badRequest(
        `mount_path must be an absolute path of plain segments, not the root (got ${JSON.stringify(path)}).`,
        param,
      );
    }
    const clash = seen.find((o) => o === path || o.startsWith(path + '/') || path.startsWith(o + '/'));
    if (clash) throw badRequest(`mount_path ${path} overlaps ${clash}.`, param);
    seen.push(path);
  }
}

/** The deployment's mounts with every volume version and model revision pinned; 400 naming the field otherwise. */
export async function pinMounts(
  db: Queryable,
  projectId: string,
  spec: { volumes?: Volumes; model_mounts?: ModelMounts },
): Promise<{ volumes?: Volumes; model_mounts?: ModelMounts }> {
  checkMountPaths(spec);
  const out: { volumes?: Volumes; model_mounts?: ModelMounts } = {};
  if (spec.volumes) {
    out.volumes = [];
    for (const [i, m] of spec.volumes.entries()) {
      const volume = await getVolume(db, projectId, m.name);
      if (!volume) throw badRequest(`Volume '${m.name}' does not exist in this project.`, `volumes[${i}].name`);
      // 0 or none: the volume's current version (the Python CLI sends 0 when its config names none).
      const version = m.version || volume.current_version;
      if (!(await getVolumeVersion(db, volume.id, version)))
        throw badRequest(`Volume '${m.name}' has no version ${version}.`, `volumes[${i}].version`);
      out.volumes.push({ mount_path: m.mount_path, name: volume.name, version });
    }
  }
  if (spec.model_mounts) {
    out.model_mounts = [];
    for (const [i, m] of spec.model_mounts.entries()) {
      const model =
        (await getRegistryModel(db, projectId, m.model_id)) ??
        (await findRegistryModelsByName(db, projectId, m.model_id))[0];
      if (!model)
        throw badRequest(`Model '${m.model_id}' is not registered in this project.`, `model_mounts[${i}].model_id`);
      const usable = (await listRevisions(db, model.id)).filter(
        (r) => r.validation_status === 'REVISION_VALIDATION_STATUS_SUCCESS',
      );
      const revision = m.revision_id ? usable.find((r) => r.id === m.revision_id) : usable[0];
      if (!revision) {
        throw badRequest(
          m.revision_id
            ? `Model '${model.id}' has no usable revision '${m.revision_id}'.`
            : `Model '${model.id}' has no weights yet: upload them (models/uploads) or register them from a fine-tune.`,
          `model_mounts[${i}].${m.revision_id ? 'revision_id' : 'model_id'}`,
        );
      }
      out.model_mounts.push({ model_id: model.id, mount_path: m.mount_path, revision_id: revision.id });
    }
  }
  return out;
}
