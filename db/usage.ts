/**
 * The usage ledger: what each organization used and what it costs, written
 * by the activities of the workflows that cause the usage.
 *
 * Money is exact: quantities, unit prices and amounts are PostgreSQL numeric
 * and decimal.js, never floats. Each record's amount is quantity × unit
 * price rounded half-up to the micro-dollar, once, when it is recorded; the
 * report sums those amounts. Every record has an idempotency key, so a
 * retried activity records its usage once.
 *
 * Time-based usage (GPU-hours, replica-hours) is metered: a resource's
 * activity opens an interval when it starts costing and closes it when it
 * stops; intervals become ledger records cut at hour boundaries, so a report
 * by hour or by day puts each piece in its window.
 */
import Decimal from 'decimal.js';
import { isDeepStrictEqual } from 'node:util';
import type pg from 'pg';
import { withTransaction, type Db, type Queryable } from './pool';

export interface UsageRecord {
  projectId: string;
  product: string;
  /** The resource the usage belongs to (job, cluster, deployment, request). */
  resourceId: string;
  quantity: Decimal.Value;
  unit: string;
  unitPrice: Decimal.Value;
  /** Defaults to quantity × unit price, rounded to the micro-dollar. */
  amount?: Decimal.Value;
  dimensions?: Record<string, string>;
  attributes?: Record<string, string>;
  occurredAt?: Date;
  idempotencyKey: string;
}

export const amountOf = (quantity: Decimal.Value, unitPrice: Decimal.Value) =>
  new Decimal(quantity).mul(unitPrice).toDecimalPlaces(6, Decimal.ROUND_HALF_UP);

/** Appends to the ledger; a record whose key is already there is not added again. Returns whether it was new. */
export async function recordUsage(db: Queryable, r: UsageRecord): Promise<boolean> {
  const amount = r.amount !== undefined ? new Decimal(r.amount) : amountOf(r.quantity, r.unitPrice);
  const { rowCount } = await db.query(
    `INSERT INTO usage_records (organization_id, project_id, product, resource_id, quantity, unit, unit_price, amount,
                                dimensions, attributes, occurred_at, idempotency_key)
     SELECT p.organization_id, p.id, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10, now()), $11
       FROM projects p WHERE p.id = $1
     ON CONFLICT (idempotency_key) DO NOTHING`,
    [
      r.projectId,
      r.product,
      r.resourceId,
      new Decimal(r.quantity).toFixed(),
      r.unit,
      new Decimal(r.unitPrice).toFixed(),
      amount.toFixed(),
      r.dimensions ?? {},
      { ...r.attributes, project_id: r.projectId, resource_id: r.resourceId },
      r.occurredAt ?? null,
      r.idempotencyKey,
    ],
  );
  return (rowCount ?? 0) > 0;
}

/** Sum of the records whose idempotency keys start with a prefix (what a job was charged so far). */
export async function recordedUnder(
  db: Queryable,
  keyPrefix: string,
): Promise<{ quantity: Decimal; amount: Decimal; count: number }> {
  const { rows } = await db.query<{ quantity: string | null; amount: string | null; n: string }>(
    `SELECT sum(quantity) AS quantity, sum(amount) AS amount, count(*) AS n
       FROM usage_records WHERE starts_with(idempotency_key, $1)`,
    [keyPrefix],
  );
  return {
    quantity: new Decimal(rows[0].quantity ?? 0),
    amount: new Decimal(rows[0].amount ?? 0),
    count: Number(rows[0].n),
  };
}

/** What accrues per hour while a resource runs. */
export interface Meter {
  projectId: string;
  product: string;
  resourceId: string;
  units: Decimal.Value;
  unit: string;
  unitPrice: Decimal.Value;
  dimensions: Record<string, string>;
  attributes?: Record<string, string>;
}

interface IntervalRow {
  id: string;
  project_id: string | null;
  product: string;
  units: string;
  unit: string;
  unit_price: string;
  dimensions: Record<string, string>;
  attributes: Record<string, string>;
  metered_until: Date;
}

const HOUR_MS = 3_600_000;

/** Turns an interval's usage from metered_until to `until` into ledger records, one per hour it touches. */
async function meterInterval(tx: pg.PoolClient, i: IntervalRow, until: Date): Promise<void> {
  let from = i.metered_until.getTime();
  const end = until.getTime();
  while (from < end) {
    const pieceEnd = Math.min(end, (Math.floor(from / HOUR_MS) + 1) * HOUR_MS);
    // GPU-hours to the micro-hour (3.6 ms): exact enough, and exact decimals from here on.
    const hours = new Decimal(pieceEnd - from).div(HOUR_MS).toDecimalPlaces(6, Decimal.ROUND_HALF_UP);
    if (i.project_id && hours.gt(0)) {
      await recordUsage(tx, {
        projectId: i.project_id,
        product: i.product,
        resourceId: i.attributes.resource_id ?? '',
        quantity: hours.mul(i.units),
        unit: i.unit,
        unitPrice: i.unit_price,
        dimensions: i.dimensions,
        attributes: i.attributes,
        occurredAt: new Date(from),
        idempotencyKey: `meter/${i.id}/${from}`,
      });
    }
    from = pieceEnd;
  }
  await tx.query('UPDATE metered_intervals SET metered_until = $2 WHERE id = $1', [i.id, until]);
}

const sameMeter = (open: IntervalRow, m: Meter) =>
  new Decimal(open.units).eq(m.units) &&
  new Decimal(open.unit_price).eq(m.unitPrice) &&
  open.product === m.product &&
  // jsonb keeps its own key order: compare the dimensions, not their text.
  isDeepStrictEqual(open.dimensions, m.dimensions);

/** Whether what accrues under a key already is `meter`: the same open interval, or none for nothing. */
const isSet = (open: IntervalRow | undefined, meter: Meter | null) =>
  open ? meter !== null && sameMeter(open, meter) : !meter || new Decimal(meter.units).lte(0);

/** The open interval of each key that has one. */
async function openIntervals(db: Queryable, meterKeys: string[], lock: '' | 'FOR UPDATE' = '') {
  const { rows } = await db.query<IntervalRow & { meter_key: string }>(
    `SELECT id, meter_key, project_id, product, units, unit, unit_price, dimensions, attributes, metered_until
       FROM metered_intervals WHERE meter_key = ANY($1) AND ended_at IS NULL ${lock}`,
    [meterKeys],
  );
  return new Map<string, IntervalRow>(rows.map((r) => [r.meter_key, r]));
}

/**
 * Sets what accrues under `meterKey` from now on: nothing (null), or a meter.
 * An open interval that differs is metered up to now and closed; a new one
 * opens. Setting the same meter again changes nothing, so callers can
 * reconcile on every state change.
 */
export async function setMeter(db: Db, meterKey: string, meter: Meter | null, now = new Date()): Promise<void> {
  await setMeters(db, [[meterKey, meter]], now);
}

/**
 * setMeter for several keys at once. Most calls change nothing (a projection whose nodes did not
 * change): one read of their open intervals says so, and only a key that changes takes the
 * transaction and lock a change needs (four statements each, on every projection of every cluster).
 */
export async function setMeters(db: Db, meters: [string, Meter | null][], now = new Date()): Promise<void> {
  const open = await openIntervals(
    db,
    meters.map(([key]) => key),
  );
  for (const [key, meter] of meters) if (!isSet(open.get(key), meter)) await changeMeter(db, key, meter, now);
}

async function changeMeter(db: Db, meterKey: string, meter: Meter | null, now: Date): Promise<void> {
  await withTransaction(db, async (tx) => {
    // Two projections of one resource at once: the second waits, then sees what the first opened.
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [meterKey]);
    const open = (await openIntervals(tx, [meterKey], 'FOR UPDATE')).get(meterKey);
    if (isSet(open, meter)) return;
    if (open) {
      const until = now > open.metered_until ? now : open.metered_until;
      await meterInterval(tx, open, until);
      await tx.query('UPDATE metered_intervals SET ended_at = $2 WHERE id = $1', [open.id, until]);
    }
    if (!meter || new Decimal(meter.units).lte(0)) return;
    await tx.query(
      `INSERT INTO metered_intervals (organization_id, project_id, meter_key, product, units, unit, unit_price,
                                      dimensions, attributes, started_at, metered_until)
       SELECT p.organization_id, p.id, $2, $3, $4, $5, $6, $7, $8, $9, $9 FROM projects p WHERE p.id = $1`,
      [
        meter.projectId,
        meterKey,
        meter.product,
        new Decimal(meter.units).toFixed(),
        meter.unit,
        new Decimal(meter.unitPrice).toFixed(),
        meter.dimensions,
        { ...meter.attributes, resource_id: meter.resourceId },
        now,
      ],
    );
  });
}

/** Closes every open interval whose key starts with a prefix (a resource that is gone). */
export async function stopMeters(db: Db, meterKeyPrefix: string, now = new Date()): Promise<void> {
  const { rows } = await db.query<{ meter_key: string }>(
    `SELECT meter_key FROM metered_intervals WHERE ended_at IS NULL AND starts_with(meter_key, $1)`,
    [meterKeyPrefix],
  );
  for (const r of rows) await changeMeter(db, r.meter_key, null, now);
}

/** Meters every open interval up to now (the usage-metering schedule); returns how many it visited. */
export async function meterOpenIntervals(db: Db, now = new Date()): Promise<number> {
  const { rows } = await db.query<{ id: string }>(
    'SELECT id FROM metered_intervals WHERE ended_at IS NULL AND metered_until < $1 ORDER BY id',
    [now],
  );
  for (const { id } of rows) {
    await withTransaction(db, async (tx) => {
      const { rows: locked } = await tx.query<IntervalRow>(
        `SELECT id, project_id, product, units, unit, unit_price, dimensions, attributes, metered_until
           FROM metered_intervals WHERE id = $1 AND ended_at IS NULL FOR UPDATE`,
        [id],
      );
      if (locked[0] && locked[0].metered_until < now) await meterInterval(tx, locked[0], now);
    });
  }
  return rows.length;
}

/** Quantities a resource recorded per product in [fromMs, toMs) (an endpoint's tokens, say). */
export async function resourceUsageByProduct(
  db: Queryable,
  resourceId: string,
  fromMs: number,
  toMs: number,
): Promise<Map<string, number>> {
  const { rows } = await db.query<{ product: string; quantity: string }>(
    `SELECT product, sum(quantity)::text AS quantity FROM usage_records
      WHERE resource_id = $1 AND occurred_at >= to_timestamp($2::float8 / 1000) AND occurred_at < to_timestamp($3::float8 / 1000)
      GROUP BY product`,
    [resourceId, fromMs, toMs],
  );
  return new Map(rows.map((r) => [r.product, Number(r.quantity)]));
}
