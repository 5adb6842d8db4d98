/**
 * Search attributes Gantry sets on every workflow so operators can find runs in
 * the Temporal UI (e.g. `GantryProjectId = "proj-..." AND GantryStatus = "running"`).
 * Registered on the namespace at start by ensureSearchAttributes(); the names
 * and types here are the single source of truth.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const SA_PROJECT_ID = defineSearchAttributeKey('GantryProjectId', SearchAttributeType.KEYWORD);
export const SA_RESOURCE_TYPE = defineSearchAttributeKey('GantryResourceType', SearchAttributeType.KEYWORD);
export const SA_RESOURCE_ID = defineSearchAttributeKey('GantryResourceId', SearchAttributeType.KEYWORD);
export const SA_STATUS = defineSearchAttributeKey('GantryStatus', SearchAttributeType.KEYWORD);

export const SA_GPU_TYPE = defineSearchAttributeKey('GantryGpuType', SearchAttributeType.KEYWORD);

export const GANTRY_SEARCH_ATTRIBUTES = [SA_PROJECT_ID, SA_RESOURCE_TYPE, SA_RESOURCE_ID, SA_STATUS, SA_GPU_TYPE];
