/**
 * Each named call of a batch or an evaluation runs once (shared/work-calls.ts). The gateway makes
 * the call without tying it to the worker's connection, keeps its final answer in PostgreSQL before
 * answering, and answers a call with the same key from what it kept, or by joining the call still
 * in flight in this gateway. So a worker killed while its call was with the model loses nothing:
 * the next worker asks again and gets the same answer, and the model ran the line once.
 *
 * A transient answer (a 5xx, 429, 408, 425) and a call that failed before it reached the model are
 * not kept: asked again, they are made again, as they should be.
 */
import type { Db } from '../db/pool';
import { findWorkCallAnswer, keepWorkCallAnswer, type KeptAnswer } from '../db/work-call-answers';
import { isTransientStatus } from '../shared/work-calls';
import type { WorkTag } from '../shared/work-tag';

export class KeptWorkCalls {
  private readonly inFlight = new Map<string, Promise<KeptAnswer>>();

  constructor(private readonly db: Db) {}

  /** The answer of call `key` of `work`: kept, in flight, or made now by `make` (and kept when final). */
  once(work: WorkTag, key: string, make: () => Promise<KeptAnswer>): Promise<KeptAnswer> {
    const id = `${work.kind}/${work.id}/${key}`;
    const running = this.inFlight.get(id);
    if (running) return running;
    const answer = (async () => {
      const kept = await findWorkCallAnswer(this.db, work, key);
      if (kept) return kept;
      const made = await make();
      if (!isTransientStatus(made.status)) await keepWorkCallAnswer(this.db, work, key, made);
      return made;
    })().finally(() => this.inFlight.delete(id));
    this.inFlight.set(id, answer);
    return answer;
  }
}
