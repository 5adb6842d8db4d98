/** Reading a JSONL blob line by line with each line's byte range: batches' and evaluations' inputs. */
import type { Readable } from 'node:stream';

/** Lines of a blob with their byte offsets (LF or CRLF); blank lines are skipped. */
export async function* linesOf(
  stream: Readable,
  base = 0,
): AsyncGenerator<{ text: string; number: number; start: number; end: number }> {
  let pending: Buffer = Buffer.alloc(0);
  let offset = base;
  let number = 0;
  const emit = function* (line: Buffer, start: number) {
    number++;
    const text = line.toString('utf8').replace(/\r$/, '');
    if (text.trim()) yield { text, number, start, end: start + line.length - 1 };
  };
  for await (const chunk of stream) {
    pending = pending.length ? Buffer.concat([pending, chunk as Buffer]) : (chunk as Buffer);
    let nl: number;
    while ((nl = pending.indexOf(0x0a)) >= 0) {
      yield* emit(pending.subarray(0, nl), offset);
      offset += nl + 1;
      pending = pending.subarray(nl + 1);
    }
  }
  if (pending.length) yield* emit(pending, offset);
}
