/**
 * The work a model call is made for, when it is not an interactive call: a batch or an
 * evaluation. The gateway puts interactive calls first and bills these as their work's usage
 * (platform/work-credentials.ts carries it on the credential the worker calls with).
 */
export const WORK_KINDS = ['batch', 'evaluation'] as const;

export type WorkKind = (typeof WORK_KINDS)[number];

export interface WorkTag {
  kind: WorkKind;
  /** The batch's or evaluation's id. */
  id: string;
}
