/** The model registry's rows: models (ml_), revisions (rv_) and their files. */
import { scheduleBlobDeletions } from './blob-deletions';
import { withTransaction, type Db, type Queryable } from './pool';

export type WeightsType = 'WEIGHTS_TYPE_DEFAULT' | 'WEIGHTS_TYPE_ADAPTER' | 'WEIGHTS_TYPE_SPECULATOR';

export interface RegistryModelRow {
  id: string;
  organization_id: string;
  project_id: string;
  name: string;
  description: string | null;
  visibility: 'VISIBILITY_PRIVATE' | 'VISIBILITY_INTERNAL';
  weights_type: WeightsType;
  base_model: string | null;
  architecture: string | null;
  context_length: number | null;
  parameters_total: string | null;
  source_fine_tune_id: string | null;
  created_at: Date;
  updated_at: Date;
  /** The owning project's slug, for the qualified name (null if the project cannot be resolved). */
  project_slug: string | null;
  /** created_at in microseconds since the epoch (exact, for page cursors). */
  created_us: string;
}

const SELECT_MODEL = `SELECT m.*, p.slug AS project_slug,
       (extract(epoch FROM m.created_at) * 1000000)::bigint AS created_us
  FROM registry_models m LEFT JOIN projects p ON p.id = m.project_id`;

/** `<project_slug>/<name>`, or the object id when the slug cannot be resolved (the spec's fallback). */
export function qualifiedModelName(m: { id: string; name: string; project_slug: string | null }): string {
  return m.project_slug ? `${m.project_slug}/${m.name}` : m.id;
}

export async function insertRegistryModel(
  db: Queryable,
  m: {
    id: string;
    projectId: string;
    name: string;
    description?: string;
    weightsType: WeightsType;
    baseModel?: string;
    architecture?: string;
    contextLength?: number;
    parametersTotal?: number;
    sourceFineTuneId?: string;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO registry_models (id, organization_id, project_id, name, description, weights_type, base_model,
                                  architecture, context_length, parameters_total, source_fine_tune_id)
     SELECT $1, organization_id, id, $3, $4, $5, $6, $7, $8, $9, $10 FROM projects WHERE id = $2`,
    [
      m.id,
      m.projectId,
      m.name,
      m.description ?? null,
      m.weightsType,
      m.baseModel ?? null,
      m.architecture ?? null,
      m.contextLength ?? null,
      m.parametersTotal ?? null,
      m.sourceFineTuneId ?? null,
    ],
  );
}

export async function insertRevision(
  db: Queryable,
  r: {
    id: string;
    modelId: string;
    blobPrefix: string;
    /** `etag`: the multipart ETag a local upload of the file had (db/model-file-uploads.ts). */
    files: Array<{ path: string; bytes: number; sha256: string; etag?: string }>;
    validationStatus: string;
  },
): Promise<void> {
  await db.query(
    'INSERT INTO registry_model_revisions (id, model_id, blob_prefix, validation_status) VALUES ($1, $2, $3, $4)',
    [r.id, r.modelId, r.blobPrefix, r.validationStatus],
  );
  for (const f of r.files) {
    await db.query(
      'INSERT INTO registry_model_files (revision_id, path, size_bytes, sha256, etag) VALUES ($1, $2, $3, $4, $5)',
      [r.id, f.path, f.bytes, f.sha256, f.etag ?? null],
    );
  }
}

export async function getRegistryModel(db: Queryable, projectId: string, id: string): Promise<RegistryModelRow | null> {
  const { rows } = await db.query<RegistryModelRow>(`${SELECT_MODEL} WHERE m.id = $1 AND m.project_id = $2`, [
    id,
    projectId,
  ]);
  return rows[0] ?? null;
}

/** Models whose qualified or bare name matches, in a project (the command-line tool's name lookup). */
export async function findRegistryModelsByName(
  db: Queryable,
  projectId: string,
  name: string,
): Promise<RegistryModelRow[]> {
  const bare = name.includes('/') ? name.slice(name.indexOf('/') + 1) : name;
  const { rows } = await db.query<RegistryModelRow>(`${SELECT_MODEL} WHERE m.project_id = $1 AND m.name = $2`, [
    projectId,
    bare,
  ]);
  return rows.filter((r) => !name.includes('/') || qualifiedModelName(r) === name);
}

export async function listRevisionFiles(
  db: Queryable,
  revisionId: string,
): Promise<Array<{ path: string; size_bytes: string; sha256: string; etag: string | null }>> {
  const { rows } = await db.query(
    'SELECT path, size_bytes, sha256, etag FROM registry_model_files WHERE revision_id = $1 ORDER BY path',
    [revisionId],
  );
  return rows;
}

/** A page of models, newest first, after a cursor (`<created_at ISO>|<id>` of the last one seen). */
export async function listRegistryModels(
  db: Queryable,
  q: {
    projectId: string;
    /** Also models of other projects of this organization shared with it (VISIBILITY_INTERNAL). */
    organizationId?: string;
    visibility?: 'VISIBILITY_PRIVATE' | 'VISIBILITY_INTERNAL';
    after?: { createdUs: string; id: string };
    limit: number;
  },
): Promise<RegistryModelRow[]> {
  const { rows } = await db.query<RegistryModelRow>(
    `${SELECT_MODEL}
      WHERE (m.project_id = $1 OR (m.organization_id = $2 AND m.visibility = 'VISIBILITY_INTERNAL'))
        AND ($3::text IS NULL OR m.visibility = $3)
        AND ($4::bigint IS NULL
             OR (m.created_at, m.id) < (timestamptz 'epoch' + $4::bigint * interval '1 microsecond', $5::text))
      ORDER BY m.created_at DESC, m.id DESC
      LIMIT $6`,
    [
      q.projectId,
      q.organizationId ?? null,
      q.visibility ?? null,
      q.after?.createdUs ?? null,
      q.after?.id ?? null,
      q.limit,
    ],
  );
  return rows;
}

export async function updateRegistryModel(
  db: Queryable,
  id: string,
  set: { name?: string; description?: string | null; visibility?: 'VISIBILITY_PRIVATE' | 'VISIBILITY_INTERNAL' },
): Promise<void> {
  await db.query(
    `UPDATE registry_models
        SET name = coalesce($2, name),
            description = CASE WHEN $3 THEN $4 ELSE description END,
            visibility = coalesce($5, visibility),
            updated_at = now()
      WHERE id = $1`,
    [id, set.name ?? null, set.description !== undefined, set.description ?? null, set.visibility ?? null],
  );
}

export interface RevisionRow {
  id: string;
  model_id: string;
  blob_prefix: string;
  validation_status: string;
  created_at: Date;
}

export async function listRevisions(db: Queryable, modelId: string): Promise<RevisionRow[]> {
  const { rows } = await db.query<RevisionRow>(
    'SELECT * FROM registry_model_revisions WHERE model_id = $1 ORDER BY created_at DESC, id DESC',
    [modelId],
  );
  return rows;
}

/** Deletes the model's rows; answers the blob keys its revisions held, recorded for deletion (db/blob-deletions.ts). */
export async function deleteRegistryModel(db: Db, id: string): Promise<string[]> {
  return withTransaction(db, async (tx) => {
    // Locked first: a revision added meanwhile waits, then finds no model, instead of losing its files.
    await tx.query('SELECT id FROM registry_models WHERE id = $1 FOR UPDATE', [id]);
    const { rows } = await tx.query<{ key: string }>(
      `SELECT r.blob_prefix || '/' || f.path AS key FROM registry_model_revisions r
         JOIN registry_model_files f ON f.revision_id = r.id WHERE r.model_id = $1`,
      [id],
    );
    await tx.query('DELETE FROM registry_models WHERE id = $1', [id]);
    const keys = rows.map((r) => r.key);
    await scheduleBlobDeletions(tx, keys);
    return keys;
  });
}

/** Where a revision's files are, if the revision is of a model the project owns. */
export async function revisionBlobPrefixInProject(
  db: Queryable,
  revisionId: string,
  projectId: string,
): Promise<string | null> {
  const { rows } = await db.query<{ blob_prefix: string }>(
    `SELECT r.blob_prefix FROM registry_model_revisions r JOIN registry_models m ON m.id = r.model_id
      WHERE r.id = $1 AND m.project_id = $2`,
    [revisionId, projectId],
  );
  return rows[0]?.blob_prefix ?? null;
}

export async function getRevision(db: Queryable, modelId: string, revisionId: string): Promise<RevisionRow | null> {
  const { rows } = await db.query<RevisionRow>(
    'SELECT * FROM registry_model_revisions WHERE id = $1 AND model_id = $2',
    [revisionId, modelId],
  );
  return rows[0] ?? null;
}
