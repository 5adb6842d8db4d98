/** `gantry whoami` and `gantry usage`. */
import { InvalidArgumentError, type Command } from 'commander';
import Decimal from 'decimal.js';
import { context, oneOf } from '../context';
import { details, print, table, time } from '../output';

interface UsageReport {
  object: 'list';
  billing_period: string;
  currency: string;
  organization_id?: string;
  earliest_window_start?: string | null;
  latest_window_end?: string | null;
  next_cursor: string | null;
  data: {
    date: string;
    start_time: string;
    end_time: string;
    line_items: {
      product_name: string;
      quantity: string;
      unit_price: string;
      cost: string;
      pricing_dimensions?: Record<string, string>;
      attributes?: Record<string, string>;
    }[];
  }[];
}

const month = (raw: string) => {
  if (!/^\d{4}-(0[1-9]|1[0-2])$/.test(raw)) throw new InvalidArgumentError('must be YYYY-MM.');
  return raw;
};

export function addAccountCommands(program: Command) {
  program
    .command('whoami')
    .description('Which API key, project and organization SERVICE_API_KEY is')
    .action(async (_opts, cmd: Command) => {
      const { client, out } = context(cmd);
      const me = await client.get('/v1/whoami');
      out.result(me, () =>
        print(
          details([
            ['API key', me.api_key_id],
            ['Organization', `${me.organization_name} (${me.organization_id})`],
            ['Organization role', me.organization_role],
            ['Project', `${me.project_name} (${me.project_id})`],
            ['Project slug', me.project_slug],
            ['Project role', me.project_role],
            ['User', me.user_id],
          ]),
        ),
      );
    });

  program
    .command('usage')
    .description("The organization's usage and cost for a month (GET /v1/billing/usage)")
    .option('--month <YYYY-MM>', 'billing month (default: the current month)', month)
    .option('--granularity <g>', 'daily or hourly windows', oneOf('daily', 'hourly'))
    .action(async (opts: { month?: string; granularity?: string }, cmd: Command) => {
      const { client, out } = context(cmd);
      // Every page of the month: one report with all its windows.
      const first = await client.get<UsageReport>('/v1/billing/usage', {
        month: opts.month,
        granularity: opts.granularity,
      });
      const report = { ...first, data: [...first.data] };
      for (let cursor = first.next_cursor; cursor;) {
        const page = await client.get<UsageReport>('/v1/billing/usage', {
          month: opts.month,
          granularity: opts.granularity,
          cursor,
        });
        report.data.push(...page.data);
        cursor = page.next_cursor;
      }
      report.next_cursor = null;
      out.result(report, () => {
        // Amounts are shown as the API's decimal strings: unit prices have more digits than cents.
        const usd = (v: string) => (report.currency === 'USD' ? `$${v}` : `${v} ${report.currency}`);
        const rows = report.data.flatMap((w) =>
          w.line_items.map((li) => {
            const dims = Object.values(li.pricing_dimensions ?? {});
            return [
              opts.granularity === 'hourly' ? time(w.start_time) : w.date,
              `${li.product_name}${dims.length ? ` (${dims.join(', ')})` : ''}`,
              li.attributes?.resource_id,
              li.quantity,
              usd(li.unit_price),
              usd(li.cost),
            ];
          }),
        );
        const total = report.data
          .flatMap((w) => w.line_items)
          .reduce((sum, li) => sum.plus(li.cost || 0), new Decimal(0));
        print(`Billing period ${report.billing_period} (${report.currency})`);
        if (!rows.length) {
          print('No usage this month.');
          return;
        }
        print(table(['window', 'product', 'resource', 'quantity', 'unit price', 'cost'], rows));
        print(`Total: ${usd(total.toString())}`);
      });
    });
}
