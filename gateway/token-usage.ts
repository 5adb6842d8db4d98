/**
 * Inference tokens per endpoint, for the usage ledger. The gateway reads the
 * `usage` object of each answer it relays (the JSON body, or the last
 * server-sent event that carries one) and adds its prompt and completion
 * tokens to the endpoint's tally; tallies are written to the ledger every
 * `flushMs`, like the router stats. Dedicated endpoints are paid by the
 * replica-hour, so tokens are recorded at DEDICATED_TOKEN_PRICE.
 */
import { randomUUID } from 'node:crypto';
import { DEDICATED_TOKEN_PRICE, PRODUCTS } from '../shared/pricing';
import { withTransaction, type Db } from '../db/pool';
import { recordUsage } from '../db/usage';

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

interface Tally extends TokenCounts {
  projectId: string;
  endpointName: string;
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

  record(endpoint: { id: string; projectId: string; name: string }, counts: TokenCounts): void {
    const t = this.pending.get(endpoint.id) ?? {
      projectId: endpoint.projectId,
      endpointName: endpoint.name,
      prompt: 0,
      completion: 0,
    };
    t.prompt += counts.prompt;
    t.completion += counts.completion;
    this.pending.set(endpoint.id, t);
  }

  async flush(): Promise<void> {
    if (!this.pending.size) return;
    const batch = [...this.pending];
    this.pending = new Map();
    const seq = ++this.seq;
    try {
      // One transaction: a failed flush wrote nothing, so its counts can wait for the next one.
      await withTransaction(this.db, async (tx) => {
        for (const [endpointId, t] of batch) {
          const lines = [
            { product: PRODUCTS.inputTokens, quantity: t.prompt, kind: 'in' },
            { product: PRODUCTS.outputTokens, quantity: t.completion, kind: 'out' },
          ];
          for (const { product, quantity, kind } of lines) {
            if (quantity <= 0) continue;
            await recordUsage(tx, {
              projectId: t.projectId,
              product,
              resourceId: endpointId,
              quantity,
              unit: 'token',
              unitPrice: DEDICATED_TOKEN_PRICE,
              dimensions: { billed_by: 'replica-hours' },
              attributes: { endpoint_name: t.endpointName },
              idempotencyKey: `inference/${this.instance}/${seq}/${endpointId}/${kind}`,
            });
          }
        }
      });
    } catch (err) {
      this.onError(err as Error);
      for (const [endpointId, t] of batch) {
        const p = this.pending.get(endpointId);
        if (p) {
          p.prompt += t.prompt;
          p.completion += t.completion;
        } else this.pending.set(endpointId, t);
      }
    }
  }
}
