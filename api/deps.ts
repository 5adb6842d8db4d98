import type { Client } from '@temporalio/client';
import type { GantryConfig } from '../platform/config';
import type { Logger } from '../platform/logger';
import type { Db } from '../db/pool';
import type { PrincipalCache } from '../db/principal-cache';
import type { QueueWakeups } from '../db/queue-wakeups';
import type { BlobStore } from '../providers/storage/blob-store';
import type { HttpMetrics } from './metrics';
import type { ServedSpeechModels } from './speech-models';

/** What routes may use. Injected by api/server.ts, and by tests with the same real parts. */
export interface ApiDeps {
  config: GantryConfig;
  db: Db;
  temporal: Client;
  logger: Logger;
  blobs: BlobStore;
  /** Cached key lookups (api/server.ts starts one); without it every request queries its key. */
  principals?: PrincipalCache;
  /** Wakes claim long-polls (api/server.ts starts one); without it a waiting claim re-checks every 250 ms. */
  queueWakeups?: QueueWakeups;
  /** Where request metrics go (the process serves them on GANTRY_METRICS_PORT); one is made when absent. */
  metrics?: HttpMetrics;
  /** Which speech models the speech hosts serve now; one is made when absent. */
  speechModels?: ServedSpeechModels;
}
