import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Writes a secret to a file only its owner can read (0600), creating the directory. */
export function writeSecretFile(file: string, secret: string): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, secret + '\n', { mode: 0o600 });
  // `mode` applies only when the file is new; an older file keeps its own.
  chmodSync(file, 0o600);
}
