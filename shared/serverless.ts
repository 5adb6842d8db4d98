/**
 * Serverless calls: a catalog model called by its name at the gateway (`model:
 * "HuggingFaceTB/SmolLM2-135M-Instruct"`) is served by a pool the installation owns, one container
 * deployment per catalog model, in a project of its own that no tenant belongs to (no member, no
 * API key): the deployments API and the gateway's /v1/deployments proxy, both scoped to the
 * caller's project, never show or reach it. api/serverless-pools.ts keeps the pools;
 * gateway/inference.ts routes to them.
 */

/** The installation's own organization and project: fixed ids, so creating them is idempotent. */
export const PLATFORM_ORGANIZATION_ID = 'org-gantry-platform';
export const PLATFORM_PROJECT_ID = 'proj-gantry-platform';
/** Slugs are global; this one is the platform's, refused to tenants. */
export const PLATFORM_PROJECT_SLUG = 'gantry-platform';

/**
 * The pool's container deployment for a catalog model: a DNS label (`gantry/reference-byte-tiny`
 * is `serverless-gantry--reference-byte-tiny`), derived so the gateway finds it by the model's name.
 */
export function serverlessPoolName(model: string): string {
  const label = model
    .toLowerCase()
    .replaceAll('/', '--')
    .replace(/[^a-z0-9-]/g, '-');
  return `serverless-${label}`.slice(0, 63).replace(/-+$/, '');
}
