/** An organization's credit: its limit, and what remains after recorded usage. */
import Decimal from 'decimal.js';
import type { Queryable } from './pool';

export async function remainingCredit(db: Queryable, projectId: string): Promise<Decimal> {
  const { rows } = await db.query<{ remaining: string }>(
    `SELECT o.credit_limit - coalesce((SELECT sum(u.amount) FROM usage_records u WHERE u.organization_id = o.id), 0)
              AS remaining
     FROM projects p JOIN organizations o ON o.id = p.organization_id WHERE p.id = $1`,
    [projectId],
  );
  return new Decimal(rows[0]?.remaining ?? 0);
}
