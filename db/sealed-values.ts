/**
 * Every value the installation stores sealed (platform/keyring.ts): deployment
 * secrets and the source tokens of model uploads, each bound to its row.
 *
 * A sealed value's place (GCM's associated data) names its table, column,
 * project and row, so a value copied into another row, of this project or
 * another, does not open there: whoever can write a sealed column (an SQL
 * injection elsewhere, a restore, a buggy move) cannot carry one tenant's
 * secret to another. Row ids never change; a secret's name may, so it is not
 * part of the place.
 *
 * Values stored before binding are bound once, each to the row it is in, by the
 * first process that starts with the keyring after migration 036
 * (`bindStoredValuesOnce`). From then on an unbound value never opens by itself:
 * one written into a row later (from an old backup, say) needs an operator to
 * run `scripts/reseal.ts`, which binds what it finds, and moves every value to
 * the current key after a rotation (`resealStoredValues`), so the old root can
 * be dropped from GANTRY_PREVIOUS_SIGNING_SECRETS.
 */
import { SealedValueUnreadable, type Keyring } from '../platform/keyring';
import type { Logger } from '../platform/logger';
import type { Db } from './pool';

/** Where sealed values live: table and sealed column (each table has `id` and `project_id`). */
export const SEALED_COLUMNS = {
  deploymentSecret: { table: 'deployment_secrets', column: 'sealed_value' },
  registryUploadToken: { table: 'registry_uploads', column: 'sealed_token' },
} as const;

export type SealedColumn = (typeof SEALED_COLUMNS)[keyof typeof SEALED_COLUMNS];

/** The row a sealed value belongs to. */
export interface SealedRow {
  id: string;
  projectId: string;
}

/** The associated data of a value stored at `row` of `where`: unambiguous (a JSON array), versioned. */
function placeOf(where: SealedColumn, row: SealedRow): string {
  return JSON.stringify(['gantry-sealed-value-v1', where.table, where.column, row.projectId, row.id]);
}

/** `value` sealed for `row` of `where`: it opens there only. */
export function sealForRow(keyring: Keyring, where: SealedColumn, row: SealedRow, value: string): Buffer {
  return keyring.seal(value, placeOf(where, row));
}

/** The value stored sealed at `row` of `where`; SealedValueUnreadable when it was sealed for another place. */
export function openFromRow(keyring: Keyring, where: SealedColumn, row: SealedRow, sealed: Buffer): string {
  return keyring.unseal(sealed, placeOf(where, row));
}

export interface ResealReport {
  /** Values moved to the current key or bound to their row, per table. */
  resealed: Record<string, number>;
  /** Values no key of the ring opens where they are (their root is gone, or they were sealed for another row), by id. */
  unreadable: string[];
}

/**
 * Seals every stored value again where `next` says so (it answers the new sealed form, or
 * undefined to leave the value), and reports what no key opens. `onlyUnbound`: look only at
 * values in a form without a place.
 */
async function resealWhere(
  db: Db,
  keyring: Keyring,
  onlyUnbound: boolean,
  next: (sealed: Buffer, place: string) => Buffer | undefined,
): Promise<ResealReport> {
  const report: ResealReport = { resealed: {}, unreadable: [] };
  for (const where of Object.values(SEALED_COLUMNS)) {
    const { table, column } = where;
    report.resealed[table] = 0;
    const { rows } = await db.query<{ id: string; project_id: string; sealed: Buffer }>(
      `SELECT id, project_id, ${column} AS sealed FROM ${table}
        WHERE ${column} IS NOT NULL AND ($1 = false OR substring(${column} FROM 1 FOR 2) <> 'GB'::bytea)`,
      [onlyUnbound],
    );
    for (const row of rows) {
      let sealed: Buffer | undefined;
      try {
        sealed = next(row.sealed, placeOf(where, { id: row.id, projectId: row.project_id }));
      } catch (err) {
        if (!(err instanceof SealedValueUnreadable)) throw err;
        report.unreadable.push(`${table}/${row.id}`);
        continue;
      }
      if (!sealed) continue;
      // Only if nobody changed the value meanwhile (a PATCH seals bound, under the current key, anyway).
      const updated = await db.query(`UPDATE ${table} SET ${column} = $1 WHERE id = $2 AND ${column} = $3`, [
        sealed,
        row.id,
        row.sealed,
      ]);
      report.resealed[table] += updated.rowCount ?? 0;
    }
  }
  return report;
}

/**
 * scripts/reseal.ts: every stored value bound to its row and under the current key. A value in a
 * form without a place is bound to the row it is in; a bound one that does not open there is
 * reported, not moved.
 */
export function resealStoredValues(db: Db, keyring: Keyring): Promise<ResealReport> {
  return resealWhere(db, keyring, false, (sealed, place) => {
    if (keyring.isCurrent(sealed)) {
      keyring.unseal(sealed, place); // reported when it does not open here (sealed for another row)
      return undefined;
    }
    if (!keyring.isBound(sealed)) sealed = keyring.bind(sealed, place);
    return keyring.isCurrent(sealed) ? sealed : keyring.seal(keyring.unseal(sealed, place), place);
  });
}

/**
 * At a process's start: binds the values stored before binding, each to the row it is in and
 * under the key that sealed it, once per installation (migration 036 leaves the row that says
 * it is still to do; several processes starting at once each bind, and the updates only apply
 * to values nobody changed meanwhile). Values no key opens are logged by row and left as they are.
 */
export async function bindStoredValuesOnce(db: Db, keyring: Keyring | undefined, logger: Logger): Promise<void> {
  if (!keyring) return;
  const { rowCount } = await db.query('SELECT 1 FROM sealed_values_to_bind');
  if (!rowCount) return;
  const report = await resealWhere(db, keyring, true, (sealed, place) => keyring.bind(sealed, place));
  if (report.unreadable.length) {
    logger.warn(
      { unreadable: report.unreadable },
      'stored secrets that no key of GANTRY_SIGNING_SECRET opens were left unbound: they cannot be used until set again',
    );
  }
  logger.info({ bound: report.resealed }, 'stored secrets bound to their rows');
  await db.query('DELETE FROM sealed_values_to_bind');
}
