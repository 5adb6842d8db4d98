/** Deployment volumes and their versions (SDK beta.jig.volumes). */
import type { Queryable } from './pool';
import { lockProjectStorageObjects } from './storage-objects';

/** One file of a volume version: `name` is its path inside the volume. */
export interface VolumeFile {
  /** A Files-API file's id, or a storage object's (with `storage`). */
  file_id: string;
  name: string;
  size: number;
  last_modified: string;
  blob_key: string;
  /** A storage object (`/v1/storage/*`), not a Files-API file: it takes no lease (it has no delete). */
  storage?: boolean;
}

export interface VolumeRow {
  id: string;
  project_id: string;
  name: string;
  type: 'readOnly';
  current_version: number;
  created_at: Date;
  updated_at: Date;
}

export interface VolumeVersionRow {
  volume_id: string;
  version: number;
  content_type: 'files';
  source_prefix: string;
  files: VolumeFile[];
  created_at: Date;
}

/** The lease holder a volume registers on each file it preloads. */
export const volumeLeaseHolder = (volumeId: string) => `deployment-volume/${volumeId}`;

/**
 * A volume's content under `prefix`: the project's Files-API files whose names start with it (named
 * as uploaded), and its storage objects in the directory it names (named relative to it: what the
 * Python CLI uploads to `<volume>/<version>/<path>` is `<path>` in the volume). The newest upload
 * of each name wins.
 */
export async function filesWithPrefix(db: Queryable, projectId: string, prefix: string): Promise<VolumeFile[]> {
  const directory = `${prefix.replace(/\/+$/, '')}/`;
  const { rows } = await db.query<VolumeFile>(
    `SELECT * FROM (
       SELECT DISTINCT ON (filename) id AS file_id, filename AS name, bytes::float8 AS size,
              to_char(uploaded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS last_modified, blob_key,
              NULL::boolean AS storage
         FROM files
        WHERE project_id = $1 AND uploaded_at IS NOT NULL AND starts_with(filename, $2)
        ORDER BY filename, uploaded_at DESC) f
     UNION ALL
     SELECT * FROM (
       SELECT DISTINCT ON (path) id AS file_id, substr(path, length($3) + 1) AS name, bytes::float8 AS size,
              to_char(uploaded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS last_modified, blob_key,
              true AS storage
         FROM storage_objects
        WHERE project_id = $1 AND uploaded_at IS NOT NULL AND starts_with(path, $3) AND $3 <> '/'
        ORDER BY path, uploaded_at DESC) s
     ORDER BY name`,
    [projectId, prefix, directory],
  );
  return rows.map(({ storage, ...f }) => (storage ? { ...f, storage: true } : f));
}

/**
 * filesWithPrefix for a version being made, in the transaction that makes it: under
 * lockProjectStorageObjects, so no storage object it answers is dropped before the version names it.
 */
export async function contentOfNewVersion(tx: Queryable, projectId: string, prefix: string): Promise<VolumeFile[]> {
  await lockProjectStorageObjects(tx, projectId);
  return filesWithPrefix(tx, projectId, prefix);
}

/**
 * Gives a version that was made while nothing matched its prefix the files that match now, once:
 * the Python CLI creates a volume before it uploads the files, so its first version is filled when
 * a replica first mounts it. Answers the version's files (another caller's, if it filled it first).
 */
export async function fillEmptyVersion(
  db: Queryable,
  volume: { id: string; project_id: string },
  version: VolumeVersionRow,
  files: VolumeFile[],
): Promise<VolumeFile[]> {
  const { rows } = await db.query<{ files: VolumeFile[] }>(
    `UPDATE deployment_volume_versions SET files = $3
      WHERE volume_id = $1 AND version = $2 AND files = '[]'::jsonb RETURNING files`,
    [volume.id, version.version, JSON.stringify(files)],
  );
  if (!rows[0]) return (await getVolumeVersion(db, volume.id, version.version))?.files ?? [];
  await leaseFiles(db, volume.id, files);
  return rows[0].files;
}

export async function getVolume(db: Queryable, projectId: string, idOrName: string): Promise<VolumeRow | null> {
  const { rows } = await db.query<VolumeRow>(
    `SELECT * FROM deployment_volumes WHERE project_id = $1 AND (id = $2 OR name = $2)
      ORDER BY (id = $2) DESC LIMIT 1`,
    [projectId, idOrName],
  );
  return rows[0] ?? null;
}

/** A page of the project's volumes, oldest first: up to `limit` after the cursor `after` (api/cursor-pages.ts). */
export async function listVolumes(
  db: Queryable,
  projectId: string,
  after: { createdUs: string; id: string } | undefined,
  limit: number,
): Promise<Array<VolumeRow & { created_us: string }>> {
  const { rows } = await db.query<VolumeRow & { created_us: string }>(
    `SELECT *, (extract(epoch FROM created_at) * 1000000)::bigint AS created_us FROM deployment_volumes
      WHERE project_id = $1
        AND ($2::bigint IS NULL
             OR (created_at, id) > (timestamptz 'epoch' + $2::bigint * interval '1 microsecond', $3::text))
      ORDER BY created_at, id LIMIT $4`,
    [projectId, after?.createdUs ?? null, after?.id ?? null, limit],
  );
  return rows;
}

export async function listVolumeVersions(db: Queryable, volumeId: string): Promise<VolumeVersionRow[]> {
  const { rows } = await db.query<VolumeVersionRow>(
    'SELECT * FROM deployment_volume_versions WHERE volume_id = $1 ORDER BY version',
    [volumeId],
  );
  return rows;
}

export async function getVolumeVersion(
  db: Queryable,
  volumeId: string,
  version: number,
): Promise<VolumeVersionRow | null> {
  const { rows } = await db.query<VolumeVersionRow>(
    'SELECT * FROM deployment_volume_versions WHERE volume_id = $1 AND version = $2',
    [volumeId, version],
  );
  return rows[0] ?? null;
}

export async function insertVolume(
  db: Queryable,
  v: { id: string; projectId: string; name: string; sourcePrefix: string; files: VolumeFile[] },
): Promise<void> {
  await db.query(`INSERT INTO deployment_volumes (id, project_id, name, current_version) VALUES ($1, $2, $3, 1)`, [
    v.id,
    v.projectId,
    v.name,
  ]);
  await insertVersion(db, v.id, 1, v.sourcePrefix, v.files);
}

/** A new version with new content becomes current. */
export async function addVolumeVersion(
  db: Queryable,
  volumeId: string,
  sourcePrefix: string,
  files: VolumeFile[],
): Promise<number> {
  const { rows } = await db.query<{ current_version: number }>(
    `UPDATE deployment_volumes SET current_version = current_version + 1, updated_at = now()
      WHERE id = $1 RETURNING current_version`,
    [volumeId],
  );
  await insertVersion(db, volumeId, rows[0].current_version, sourcePrefix, files);
  return rows[0].current_version;
}

async function insertVersion(db: Queryable, volumeId: string, version: number, prefix: string, files: VolumeFile[]) {
  await db.query(
    `INSERT INTO deployment_volume_versions (volume_id, version, source_prefix, files) VALUES ($1, $2, $3, $4)`,
    [volumeId, version, prefix, JSON.stringify(files)],
  );
  await leaseFiles(db, volumeId, files);
}

/** Leases every Files-API file, so none of a version's content can be deleted while the volume exists. */
async function leaseFiles(db: Queryable, volumeId: string, files: VolumeFile[]) {
  await db.query(`INSERT INTO file_leases (file_id, holder) SELECT unnest($1::text[]), $2 ON CONFLICT DO NOTHING`, [
    files.filter((f) => !f.storage).map((f) => f.file_id),
    volumeLeaseHolder(volumeId),
  ]);
}

export async function renameVolume(db: Queryable, volumeId: string, name: string): Promise<void> {
  await db.query('UPDATE deployment_volumes SET name = $2, updated_at = now() WHERE id = $1', [volumeId, name]);
}

export async function deleteVolume(db: Queryable, volumeId: string): Promise<void> {
  await db.query('DELETE FROM file_leases WHERE holder = $1', [volumeLeaseHolder(volumeId)]);
  await db.query('DELETE FROM deployment_volumes WHERE id = $1', [volumeId]);
}

/** Deployments of the project that mount the volume, with the version each mounts. */
export async function volumeMounts(
  db: Queryable,
  projectId: string,
  volumeName: string,
): Promise<Array<{ deployment_id: string; version: number }>> {
  const { rows } = await db.query<{ deployment_id: string; version: number }>(
    `SELECT d.id AS deployment_id, (m->>'version')::int AS version
       FROM deployments d, jsonb_array_elements(coalesce(d.state->'spec'->'volumes', '[]'::jsonb)) m
      WHERE d.project_id = $1 AND m->>'name' = $2`,
    [projectId, volumeName],
  );
  return rows;
}
