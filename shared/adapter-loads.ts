/** Names of the adapter-load workflow's messages: Signals (the definitions are in workflows/adapters.ts). */
export const ADAPTER_LOAD_MESSAGES = {
  setRevision: 'setRevision',
  detach: 'detach',
} as const;
