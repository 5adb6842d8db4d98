/**
 * GET /billing/usage (spec: Account helpers; the official SDK's
 * BillingUsageReport is the shape): the organization's usage and cost line
 * items of one month, by day or by hour, in cursor pages of windows. A beta,
 * enabled per organization; operators switch it with
 * PATCH /v1/admin/organizations/{id}.
 */
import { billingUsageEnabled, setBillingUsageEnabled, usageWindows } from '../../db/usage-report';
import type { ApiDeps } from '../deps';
import { badRequest, forbidden, notFound } from '../errors';
import type { ApiRouter } from '../route';
import {
  OrganizationFeaturesSchema,
  UpdateOrganizationFeaturesBody,
  UsageReportSchema,
  UsageReportQuery,
} from '../schemas/account';
import { OrganizationParams } from '../schemas/common';

const currentMonth = () => new Date().toISOString().slice(0, 7);

/** GET /billing/usage, on the router given (the spec names it without a prefix; `/v1` has it too). */
export function addBillingUsageRoute(router: ApiRouter, { db }: ApiDeps, operationIdSuffix = '') {
  router.add({
    method: 'get',
    path: '/billing/usage',
    operationId: `getBillingUsage${operationIdSuffix}`,
    summary: "The organization's usage and cost line items for a month, by day or hour (beta, per organization)",
    tags: ['account'],
    strict: true,
    query: UsageReportQuery,
    errors: [403],
    response: { status: 200, description: 'The usage report', schema: UsageReportSchema },
    handler: async ({ principal: p, query }) => {
      if (!p.organizationRole) {
        throw forbidden(
          'Usage reports are for members of the organization (a user key).',
          'organization_member_required',
        );
      }
      if (!(await billingUsageEnabled(db, p.organizationId))) {
        throw forbidden(
          `Usage reports are a beta that is not enabled for organization ${p.organizationId}; ask the operators of this installation to enable it.`,
          'billing_usage_not_enabled',
        );
      }
      if (query.organization_id !== undefined && query.organization_id !== p.organizationId) {
        throw forbidden(`This key reports on organization ${p.organizationId} only.`, 'organization_mismatch');
      }
      const month = query.month ?? currentMonth();
      const windows = await usageWindows(db, p.organizationId, month, query.granularity, p);
      let from = 0;
      const cursor = query.after ?? query.cursor;
      if (cursor) {
        const param = query.after !== undefined ? 'after' : 'cursor';
        if (Number.isNaN(Date.parse(cursor))) throw badRequest(`${param} is not a cursor this API issued.`, param);
        from = windows.findIndex((w) => w.start_time > cursor);
        if (from < 0) from = windows.length;
      }
      const page = windows.slice(from, from + query.limit);
      const more = from + query.limit < windows.length;
      return {
        object: 'list' as const,
        organization_id: p.organizationId,
        billing_period: month,
        currency: 'USD' as const,
        data: page,
        earliest_window_start: windows[0]?.start_time ?? null,
        latest_window_end: windows[windows.length - 1]?.end_time ?? null,
        next_cursor: more ? page[page.length - 1].start_time : null,
      };
    },
  });
}

/** Operators switch the usage report on or off per organization. */
export function addBillingAdminRoutes(admin: ApiRouter, { db }: ApiDeps) {
  admin.add({
    method: 'patch',
    path: '/admin/organizations/:organizationId',
    operationId: 'updateOrganizationFeatures',
    summary: 'Operators: switch beta features of an organization (the usage report)',
    tags: ['operators'],
    access: 'platform-admin',
    strict: true,
    params: OrganizationParams,
    body: UpdateOrganizationFeaturesBody,
    errors: [403, 404],
    response: { status: 200, description: 'The features now in force', schema: OrganizationFeaturesSchema },
    handler: async ({ params, body }) => {
      if (!(await setBillingUsageEnabled(db, params.organizationId, body.billing_usage_enabled))) {
        throw notFound(`No organization '${params.organizationId}'.`);
      }
      return { organization_id: params.organizationId, billing_usage_enabled: body.billing_usage_enabled };
    },
  });
}
