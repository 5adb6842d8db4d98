/**
 * Model calls made for a batch or an evaluation are named, so that each runs once: the worker
 * sends the call's key in `x-gantry-work-call` (a batch's line, an evaluation row's generation or
 * judgment), and the gateway keeps the final answer under it (gateway/kept-work-calls.ts). A worker
 * lost mid-call asks again with the same key and gets the kept answer, or joins the call still in
 * flight; the model is not asked twice and the tokens are billed once.
 */
export const WORK_CALL_HEADER = 'x-gantry-work-call';

/** What a key may be: the worker's own names (`line-12`, `row-3/judge/0`), nothing a tenant writes. */
export const WORK_CALL_KEY = /^[A-Za-z0-9_./-]{1,120}$/;

/** Statuses that are not an answer: the call may succeed later, so nothing is kept and it is asked again. */
const TRANSIENT_STATUSES = new Set([408, 425, 429]);

export const isTransientStatus = (status: number) => status >= 500 || TRANSIENT_STATUSES.has(status);
