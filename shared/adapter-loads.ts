/** Names of the adapter-load workflow's messages: Signals (the definitions are in workflows/adapters.ts). */
export const ADAPTER_LOAD_MESSAGES = {
  setRevision: 'setRevision',
  detach: 'detach',
} as const;

/** The workflow that loads adapter `adapterModelId` onto deployment `deploymentId`'s replicas. */
export const adapterLoadWorkflowId = (deploymentId: string, adapterModelId: string) =>
  `adapter-load/${deploymentId}/${adapterModelId}`;
