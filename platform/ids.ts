import { randomUUID } from 'node:crypto';

/**
 * Resource ids are a short type prefix and a random UUID, e.g. `sc-3f1c...`.
 * The prefix makes ids readable in logs and in the Temporal UI; the separator
 * follows the spec where it names one (`ft-`, `ml_`, `rv_`, `cr_`).
 */
export function newId(prefix: string, separator: '-' | '_' = '-'): string {
  return `${prefix}${separator}${randomUUID()}`;
}
