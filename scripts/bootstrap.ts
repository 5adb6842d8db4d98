/**
 * One-shot first start for installations that run each process on its own
 * (docker-compose.yml's `bootstrap` service): applies the migrations, creates
 * the default organization, project and admin API key, and writes the key to a
 * file. `./dev up` does the same itself; this is that step without the rest.
 *
 * Safe to run on every start: migrations and bootstrapDefaultAccount() are
 * idempotent and take advisory locks, so a rerun (or a race with the API's own
 * migration run) changes nothing.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { loadConfig, requireDatabaseUrl } from '../platform/config';
import { exitOnStartupError, ownerOnlyFiles, retryUntilReady } from '../platform/lifecycle';
import { createLogger } from '../platform/logger';
import { writeSecretFile } from '../platform/secret-file';
import { bootstrapDefaultAccount } from '../db/bootstrap';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';

const say = (line: string) => process.stderr.write(`[gantry] ${line}\n`);

async function main() {
  ownerOnlyFiles();
  const config = loadConfig();
  const logger = createLogger('bootstrap', config.logLevel);
  const keyFile = config.adminKeyFile;
  // Before touching the database: the key's secret is never stored there, so
  // an unwritable directory found after the account exists would lose it.
  mkdirSync(path.dirname(keyFile), { recursive: true });

  const db = createPool(requireDatabaseUrl(config));
  try {
    const applied = await retryUntilReady('PostgreSQL', () => migrate(db), logger);
    if (applied.length) say(`migrations applied: ${applied.join(', ')}`);
    const created = await bootstrapDefaultAccount(db);
    if (created) {
      writeSecretFile(keyFile, created.apiKey);
      // Where, not what: this output ends up in container logs, which are
      // neither private nor short-lived.
      say(`created the default organization, project 'default' and an admin API key; the key is in ${keyFile}`);
    } else {
      say('the default account already exists; no new admin API key was created');
    }
  } finally {
    await db.end();
  }
}

main().catch(exitOnStartupError(createLogger('bootstrap')));
