/**
 * The organization usage report (GET /billing/usage, the official SDK's
 * BillingUsageReport): the ledger of one billing month, summed per time
 * window (a UTC day or hour) and per line item: product, unit price, pricing
 * dimensions and the resource it belongs to.
 */
import Decimal from 'decimal.js';
import type { Queryable } from './pool';
import type { OrganizationRole } from './accounts';
import { visibleToCaller } from './administration';

export type Granularity = 'daily' | 'hourly';

export interface LineItem {
  product_name: string;
  quantity: string;
  unit_price: string;
  cost: string;
  pricing_dimensions: Record<string, string>;
  attributes: Record<string, string>;
}

export interface UsageWindow {
  date: string;
  start_time: string;
  end_time: string;
  line_items: LineItem[];
}

/** The first instant of a `YYYY-MM` month and of the next one, in UTC. */
export function monthBounds(month: string): { start: Date; end: Date } {
  const [y, m] = month.split('-').map(Number);
  return { start: new Date(Date.UTC(y, m - 1, 1)), end: new Date(Date.UTC(y, m, 1)) };
}

/**
 * Every window of the month that has usage, in order: of the projects the viewer sees (an
 * organization admin sees the whole organization, including usage no project holds any more).
 */
export async function usageWindows(
  db: Queryable,
  organizationId: string,
  month: string,
  granularity: Granularity,
  viewer: { userId: string | null; organizationRole: OrganizationRole | null },
): Promise<UsageWindow[]> {
  const { start, end } = monthBounds(month);
  const unit = granularity === 'hourly' ? 'hour' : 'day';
  const { rows } = await db.query<{
    window_start: Date;
    product: string;
    unit_price: string;
    dimensions: Record<string, string>;
    attributes: Record<string, string>;
    quantity: string;
    amount: string;
  }>(
    `SELECT date_trunc($4, occurred_at, 'UTC') AS window_start, product, unit_price, dimensions, attributes,
            sum(quantity) AS quantity, sum(amount) AS amount
       FROM usage_records
      WHERE organization_id = $1 AND occurred_at >= $2 AND occurred_at < $3
        AND ($5::text = 'Admin' OR project_id IN (
              SELECT p.id FROM projects p
                LEFT JOIN project_members pm ON pm.project_id = p.id AND pm.user_id = $6
               WHERE p.organization_id = $1 AND ${visibleToCaller('$5')}))
      GROUP BY 1, product, unit_price, dimensions, attributes
      ORDER BY 1, product, attributes::text, unit_price`,
    [organizationId, start, end, unit, viewer.organizationRole, viewer.userId],
  );
  const windows: UsageWindow[] = [];
  const stepMs = granularity === 'hourly' ? 3_600_000 : 86_400_000;
  for (const r of rows) {
    const startTime = r.window_start.toISOString();
    let w = windows[windows.length - 1];
    if (!w || w.start_time !== startTime) {
      w = {
        date: startTime.slice(0, 10),
        start_time: startTime,
        end_time: new Date(r.window_start.getTime() + stepMs).toISOString(),
        line_items: [],
      };
      windows.push(w);
    }
    w.line_items.push({
      product_name: r.product,
      quantity: new Decimal(r.quantity).toFixed(),
      unit_price: new Decimal(r.unit_price).toFixed(),
      cost: new Decimal(r.amount).toFixed(),
      pricing_dimensions: r.dimensions,
      attributes: r.attributes,
    });
  }
  return windows;
}

export async function billingUsageEnabled(db: Queryable, organizationId: string): Promise<boolean> {
  const { rows } = await db.query<{ billing_usage_enabled: boolean }>(
    'SELECT billing_usage_enabled FROM organizations WHERE id = $1',
    [organizationId],
  );
  return rows[0]?.billing_usage_enabled ?? false;
}

export async function setBillingUsageEnabled(db: Queryable, organizationId: string, enabled: boolean) {
  const { rowCount } = await db.query('UPDATE organizations SET billing_usage_enabled = $2 WHERE id = $1', [
    organizationId,
    enabled,
  ]);
  return (rowCount ?? 0) > 0;
}
