/** Small datasets tests write inline, and a look at what landed on disk. */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';

export const jsonl = (...records: unknown[]) => records.map((r) => JSON.stringify(r)).join('\n') + '\n';

export const chat = (question: string, answer: string) => ({
  messages: [
    { role: 'user', content: question },
    { role: 'assistant', content: answer },
  ],
});

/** Every file below `root` (blob store checks). */
export function filesUnder(root: string): string[] {
  const walk = (d: string): string[] =>
    existsSync(d)
      ? readdirSync(d, { withFileTypes: true }).flatMap((e) =>
          e.isDirectory() ? walk(path.join(d, e.name)) : [path.join(d, e.name)],
        )
      : [];
  return walk(root);
}
