/**
 * Writes recorded workflow histories into test/replay/histories/, the only way
 * they are written: never over an existing file, and each new one is added to
 * SHA256SUMS, which test/replay/patches.test.ts holds every file to (recorded
 * histories are never modified or deleted).
 */
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const HISTORIES_DIR = path.resolve(__dirname, '..', '..', 'test', 'replay', 'histories');
export const HISTORIES_MANIFEST = path.join(HISTORIES_DIR, 'SHA256SUMS');

/** Writes `<type>-<label>.json`; returns its path, or null when a history of that name exists already. */
export function writeRecordedHistory(type: string, label: string, json: string): string | null {
  if (!/^[a-z0-9-]+$/i.test(label)) throw new Error('label may hold only letters, digits and dashes');
  const name = `${type}-${label}.json`;
  const file = path.join(HISTORIES_DIR, name);
  if (existsSync(file)) return null;
  const text = json.endsWith('\n') ? json : `${json}\n`;
  writeFileSync(file, text);
  appendFileSync(HISTORIES_MANIFEST, `${createHash('sha256').update(text).digest('hex')}  ${name}\n`);
  return file;
}
