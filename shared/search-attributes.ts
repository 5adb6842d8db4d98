/**
 * Search attributes Gantry sets on every workflow so operators can find runs in
 * the Temporal UI (e.g. `GantryProjectId = "proj-..." AND GantryPhase = "failed"`).
 * Registered on the namespace at start by ensureSearchAttributes(); the names
 * and types here are the single source of truth.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const SA_PROJECT_ID = defineSearchAttributeKey('GantryProjectId', SearchAttributeType.KEYWORD);
export const SA_RESOURCE_TYPE = defineSearchAttributeKey('GantryResourceType', SearchAttributeType.KEYWORD);
export const SA_RESOURCE_ID = defineSearchAttributeKey('GantryResourceId', SearchAttributeType.KEYWORD);
export const SA_STATUS = defineSearchAttributeKey('GantryStatus', SearchAttributeType.KEYWORD);

/** One vocabulary across every resource (see gantryPhaseOf), beside the resource's own GantryStatus. */
export const SA_PHASE = defineSearchAttributeKey('GantryPhase', SearchAttributeType.KEYWORD);

export const SA_GPU_TYPE = defineSearchAttributeKey('GantryGpuType', SearchAttributeType.KEYWORD);

export const GANTRY_SEARCH_ATTRIBUTES = [
  SA_PROJECT_ID,
  SA_RESOURCE_TYPE,
  SA_RESOURCE_ID,
  SA_STATUS,
  SA_PHASE,
  SA_GPU_TYPE,
];

export const GANTRY_PHASES = ['waiting', 'active', 'failed', 'done'] as const;
export type GantryPhase = (typeof GANTRY_PHASES)[number];

// The statuses of each vocabulary that are not `active` (working or serving), lower-cased:
// files (QUEUED, COMPLETED, INVALID_FORMAT, FAILED, DISCARDED), fine-tunes, clusters (WaitingFor…,
// Paused, OnDemandComputePaused, Deleting), deployments (ScaledToZero, Failed), remediations
// (PENDING_APPROVAL … AUTO_RESOLVED), self-checks (passed, failed), rollouts (ROLLOUT_STATE_PAUSED,
// SYSTEM_PAUSED, COMPLETED, CANCELED, FAILED), model uploads (REMOTE_UPLOAD_STATUS_*), volumes (deleted),
// batches (EXPIRED), evaluations (user_error), ended runs of deployments and clusters (Deleted) and
// adapter loads (ADAPTER_LOAD_STATE_DETACHED).
const WAITING = new Set([
  'queued',
  'pending',
  'pending_approval',
  'paused',
  'system_paused',
  'ondemandcomputepaused',
  'scaledtozero',
]);
const FAILED = new Set(['failed', 'error', 'user_error', 'invalid_format']);
// A cluster that is Deleting has nothing more run on it: its last status before the run ends.
const DONE = new Set([
  'completed',
  'succeeded',
  'auto_resolved',
  'cancelled',
  'canceled',
  'discarded',
  'passed',
  'deleting',
  'deleted',
  'expired', // a batch past its completion window: it ended, with the lines answered so far
  'detached',
]);

/**
 * The normalized phase of any Gantry status (files, fine-tunes, clusters,
 * deployments, remediations, self-checks each have their own vocabulary), so
 * one search finds what is waiting, working, failed or finished everywhere:
 * waiting (queued, scheduled, paused, scaled to zero or waiting for something),
 * active (working or serving, Degraded included), failed, done.
 */
export function gantryPhaseOf(status: string): GantryPhase {
  // Enum-style statuses (ROLLOUT_STATE_PAUSED, REMOTE_UPLOAD_STATUS_SUCCEEDED) are read by their last words.
  const s = status.toLowerCase().replace(/^[a-z_]*?_(?:state|status)_/, '');
  if (FAILED.has(s)) return 'failed';
  if (DONE.has(s)) return 'done';
  if (WAITING.has(s) || s.startsWith('waiting')) return 'waiting';
  return 'active';
}

/** The status and its phase, as one search-attribute update (every status change sets both). */
export const statusSearchAttributes = (status: string) => [
  { key: SA_STATUS, value: status },
  { key: SA_PHASE, value: gantryPhaseOf(status) },
];
