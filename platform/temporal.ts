/**
 * Connections to Temporal for the API (client) and the workers (native
 * connection), built from one set of settings: a local dev server by default,
 * or an external cluster with TLS / mTLS / API key.
 */
import { readFileSync } from 'node:fs';
import type { Client, Connection, TLSConfig } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { SearchAttributeType } from '@temporalio/common';
import { GANTRY_SEARCH_ATTRIBUTES } from '../shared/search-attributes';
import type { GantryConfig } from './config';

type TemporalConfig = GantryConfig['temporal'];

export function temporalConnectionOptions(t: TemporalConfig): {
  address: string;
  tls?: TLSConfig | boolean;
  apiKey?: string;
} {
  let tls: TLSConfig | boolean | undefined;
  if (t.tlsEnabled) {
    const cfg: TLSConfig = {};
    if (t.tlsServerName) cfg.serverNameOverride = t.tlsServerName;
    if (t.tlsCertPath && t.tlsKeyPath) {
      cfg.clientCertPair = { crt: readFileSync(t.tlsCertPath), key: readFileSync(t.tlsKeyPath) };
    }
    tls = cfg;
  }
  return { address: t.address, tls, apiKey: t.apiKey };
}

export const INDEXED_TYPE: Record<string, temporal.api.enums.v1.IndexedValueType> = {
  [SearchAttributeType.KEYWORD]: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  [SearchAttributeType.TEXT]: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
  [SearchAttributeType.INT]: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_INT,
  [SearchAttributeType.DATETIME]: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
};

/**
 * Registers Gantry's search attributes on the namespace if they are missing.
 * Idempotent: safe to run from every process at start.
 */
export async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<string[]> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const known = new Set(Object.keys(existing.customAttributes ?? {}));
  const missing = GANTRY_SEARCH_ATTRIBUTES.filter((k) => !known.has(k.name));
  if (missing.length === 0) return [];
  const searchAttributes: Record<string, temporal.api.enums.v1.IndexedValueType> = {};
  for (const key of missing) searchAttributes[key.name] = INDEXED_TYPE[key.type];
  try {
    await connection.operatorService.addSearchAttributes({ namespace, searchAttributes });
  } catch (err) {
    // Another process registered them between our list and add: that is fine.
    if (!/already exists/i.test(String((err as Error).message))) throw err;
  }
  return missing.map((k) => k.name);
}

export interface QueuePollers {
  name: string;
  workflow_pollers: number;
  activity_pollers: number;
  pollers: Array<{ identity: string; kind: 'workflow' | 'activity'; last_access_time: string | null }>;
}

/**
 * A poller counts as live when it polled within this window. Workers re-poll
 * at least every ~70 s (long-poll timeout), while the server remembers
 * departed pollers for minutes, so a short window is the honest reading.
 */
export const LIVE_POLLER_WINDOW_MS = 2 * 60_000;

export async function describeTaskQueuePollers(client: Client, name: string, now = Date.now()): Promise<QueuePollers> {
  const kinds = [
    ['workflow', temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW],
    ['activity', temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY],
  ] as const;
  const result: QueuePollers = { name, workflow_pollers: 0, activity_pollers: 0, pollers: [] };
  for (const [kind, taskQueueType] of kinds) {
    const res = await client.workflowService.describeTaskQueue({
      namespace: client.options.namespace,
      taskQueue: { name, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
      taskQueueType,
    });
    for (const p of res.pollers ?? []) {
      const seconds = p.lastAccessTime?.seconds;
      const at = seconds != null ? Number(seconds) * 1000 + Math.floor((p.lastAccessTime?.nanos ?? 0) / 1e6) : null;
      if (at !== null && now - at > LIVE_POLLER_WINDOW_MS) continue;
      result.pollers.push({
        identity: p.identity ?? '',
        kind,
        last_access_time: at ? new Date(at).toISOString() : null,
      });
      if (kind === 'workflow') result.workflow_pollers++;
      else result.activity_pollers++;
    }
  }
  return result;
}
