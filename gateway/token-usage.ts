/**
 * Inference tokens, for the usage ledger. The gateway reads the `usage`
 * object of each answer it relays (the JSON body, or the last server-sent
 * event that carries one) and adds its prompt and completion tokens to a
 * tally; tallies are written to the ledger every `flushMs`, like the router
 * stats. Two kinds of tally: a dedicated endpoint's (paid by the replica-hour,
 * so its tokens are recorded at DEDICATED_TOKEN_PRICE), and a project's
 * serverless calls of one catalog model (paid per token at the catalog's
 * serverless prices).
 */
import { randomUUID } from 'node:crypto';
import Decimal from 'decimal.js';
import { DEDICATED_TOKEN_PRICE, PRODUCTS } from '../shared/pricing';
import { withTransaction, type Db } from '../db/pool';
import { recordUsage } from '../db/usage';
import type { WorkTag } from '../shared/work-tag';

/** JSON bodies larger than this are not parsed for usage (the answer still goes through). */
const MAX_JSON_BYTES = 4 * 1024 * 1024;
/** Server-sent events: the usage event is at the end; this much of the end is kept. */
const SSE_TAIL_BYTES = 64 * 1024;

export interface TokenCounts {
  prompt: number;
  completion: number;
}

function countsOf(value: unknown): TokenCounts | null {
  const usage = (value as { usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } } | null)?.usage;
  if (!usage || typeof usage.prompt_tokens !== 'number' || typeof usage.completion_tokens !== 'number') return null;
  return { prompt: usage.prompt_tokens, completion: usage.completion_tokens };
}

/** Watches the bytes of one answer and finds its token usage at the end. */
export class UsageTap {
  private chunks: Buffer[] = [];
  private bytes = 0;
  private overflow = false;

  constructor(private readonly sse: boolean) {}

  write(chunk: Buffer): void {
    if (this.overflow) return;
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    if (this.sse) {
      while (this.chunks.length > 1 && this.bytes - this.chunks[0].length >= SSE_TAIL_BYTES) {
        this.bytes -= this.chunks.shift()!.length;
      }
    } else if (this.bytes > MAX_JSON_BYTES) {
      this.overflow = true;
      this.chunks = [];
    }
  }

  usage(): TokenCounts | null {
    if (this.overflow) return null;
    const text = Buffer.concat(this.chunks).toString('utf8');
    if (!this.sse) {
      try {
        return countsOf(JSON.parse(text));
      } catch {
        return null;
      }
    }
    const events = text.split('\n').filter((l) => l.startsWith('data:') && l.includes('"usage"'));
    for (const line of events.reverse()) {
      try {
        const counts = countsOf(JSON.parse(line.slice(5)));
        if (counts) return counts;
      } catch {
        // the cut first line of the kept tail
      }
    }
    return null;
  }
}

/** What a tally's tokens are billed as: to which project, for which resource, at what price per token. */
export interface TokenBilling {
  projectId: string;
  /** The endpoint's id, or the catalog model's name. */
  resourceId: string;
  products: { input: string; output: string };
  /** USD per token. */
  unitPrices: { input: Decimal.Value; output: Decimal.Value };
  dimensions: Record<string, string>;
  attributes: Record<string, string>;
}

/** A dedicated endpoint's tokens: recorded per endpoint, paid by its replica-hours. */
export const endpointTokenBilling = (endpoint: { id: string; projectId: string; name: string }): TokenBilling => ({
  projectId: endpoint.projectId,
  resourceId: endpoint.id,
  products: { input: PRODUCTS.inputTokens, output: PRODUCTS.outputTokens },
  unitPrices: { input: DEDICATED_TOKEN_PRICE, output: DEDICATED_TOKEN_PRICE },
  dimensions: { billed_by: 'replica-hours' },
  attributes: { endpoint_name: endpoint.name },
});

/** A project's serverless calls of a catalog model: per token, at its prices per million tokens. */
export const serverlessTokenBilling = (
  projectId: string,
  model: string,
  pricePerMillion: { input: string; output: string },
): TokenBilling => ({
  projectId,
  resourceId: model,
  products: { input: PRODUCTS.serverlessInputTokens, output: PRODUCTS.serverlessOutputTokens },
  unitPrices: {
    input: new Decimal(pricePerMillion.input).div(1_000_000),
    output: new Decimal(pricePerMillion.output).div(1_000_000),
  },
  dimensions: { billed_by: 'tokens', model },
  attributes: { model },
});

/**
 * A batch's or an evaluation's tokens: the same prices as the call they were made as (a dedicated
 * endpoint's, a serverless model's), recorded as that work's usage, per batch or evaluation.
 */
export function workTokenBilling(billing: TokenBilling, work: WorkTag | undefined): TokenBilling {
  if (!work) return billing;
  const products = work.kind === 'batch' ? PRODUCTS_OF_WORK.batch : PRODUCTS_OF_WORK.evaluation;
  return {
    ...billing,
    resourceId: work.id,
    products,
    dimensions: { ...billing.dimensions, [`${work.kind}_of`]: billing.resourceId },
    attributes: { ...billing.attributes, [`${work.kind}_id`]: work.id },
  };
}

const PRODUCTS_OF_WORK = {
  batch: { input: PRODUCTS.batchInputTokens, output: PRODUCTS.batchOutputTokens },
  evaluation: { input: PRODUCTS.evaluationInputTokens, output: PRODUCTS.evaluationOutputTokens },
};

interface Tally extends TokenCounts {
  billing: TokenBilling;
}

export class TokenUsage {
  private pending = new Map<string, Tally>();
  private readonly instance = randomUUID();
  private seq = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly db: Db,
    /** Told when a flush fails; its counts are kept for the next one. */
    private readonly onError: (err: Error) => void,
    flushMs = 1000,
  ) {
    this.timer = setInterval(() => void this.flush(), flushMs);
    this.timer.unref();
  }

  record(billing: TokenBilling, counts: TokenCounts): void {
    // The dimensions too: a batch's tokens of two models are two tallies at two prices.
    const key = `${billing.projectId}/${billing.resourceId}/${JSON.stringify(billing.dimensions)}`;
    const t = this.pending.get(key) ?? { billing, prompt: 0, completion: 0 };
    t.prompt += counts.prompt;
    t.completion += counts.completion;
    this.pending.set(key, t);
  }

  async flush(): Promise<void> {
    if (!this.pending.size) return;
    const batch = [...this.pending];
    this.pending = new Map();
    const seq = ++this.seq;
    try {
      // One transaction: a failed flush wrote nothing, so its counts can wait for the next one.
      await withTransaction(this.db, async (tx) => {
        for (const [key, { billing: b, prompt, completion }] of batch) {
          const lines = [
            { product: b.products.input, unitPrice: b.unitPrices.input, quantity: prompt, kind: 'in' },
            { product: b.products.output, unitPrice: b.unitPrices.output, quantity: completion, kind: 'out' },
          ];
          for (const { product, unitPrice, quantity, kind } of lines) {
            if (quantity <= 0) continue;
            await recordUsage(tx, {
              projectId: b.projectId,
              product,
              resourceId: b.resourceId,
              quantity,
              unit: 'token',
              unitPrice,
              dimensions: b.dimensions,
              attributes: b.attributes,
              idempotencyKey: `inference/${this.instance}/${seq}/${key}/${kind}`,
            });
          }
        }
      });
    } catch (err) {
      this.onError(err as Error);
      for (const [key, t] of batch) {
        const p = this.pending.get(key);
        if (p) {
          p.prompt += t.prompt;
          p.completion += t.completion;
        } else this.pending.set(key, t);
      }
    }
  }
}
