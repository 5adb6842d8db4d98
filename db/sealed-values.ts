/**
 * Every value the installation stores sealed (platform/keyring.ts): deployment
 * secrets and the source tokens of model uploads. After a key rotation,
 * `resealStoredValues` opens each value still under an older key and seals it
 * under the current one, so the old root can be dropped from
 * GANTRY_PREVIOUS_SIGNING_SECRETS.
 */
import type { Keyring } from '../platform/keyring';
import type { Db } from './pool';

/** Where sealed values live: table, key column, sealed column. */
const SEALED_COLUMNS = [
  { table: 'deployment_secrets', column: 'sealed_value' },
  { table: 'registry_uploads', column: 'sealed_token' },
] as const;

export interface ResealReport {
  /** Values moved to the current key, per table. */
  resealed: Record<string, number>;
  /** Values no key of the ring opens (their root is gone): left as they are, by id. */
  unreadable: string[];
}

export async function resealStoredValues(db: Db, keyring: Keyring): Promise<ResealReport> {
  const report: ResealReport = { resealed: {}, unreadable: [] };
  for (const { table, column } of SEALED_COLUMNS) {
    report.resealed[table] = 0;
    const { rows } = await db.query<{ id: string; sealed: Buffer }>(
      `SELECT id, ${column} AS sealed FROM ${table} WHERE ${column} IS NOT NULL`,
    );
    for (const row of rows) {
      if (keyring.isCurrent(row.sealed)) continue;
      let value: string;
      try {
        value = keyring.unseal(row.sealed);
      } catch {
        report.unreadable.push(`${table}/${row.id}`);
        continue;
      }
      // Only if nobody changed the value meanwhile (a PATCH seals under the current key anyway).
      const updated = await db.query(`UPDATE ${table} SET ${column} = $1 WHERE id = $2 AND ${column} = $3`, [
        keyring.seal(value),
        row.id,
        row.sealed,
      ]);
      report.resealed[table] += updated.rowCount ?? 0;
    }
  }
  return report;
}
