/**
 * Failure types an entity workflow's Update validator refuses with (clusters, deployments,
 * rollouts), mapped by the API to 400 (naming the field in the failure's first detail), 404 and
 * 409 (api/workflows.ts updateRejection).
 */
export const UPDATE_REJECTIONS = { invalid: 'InvalidArgument', notFound: 'NotFound', conflict: 'Conflict' } as const;
export type UpdateRejection = (typeof UPDATE_REJECTIONS)[keyof typeof UPDATE_REJECTIONS];
