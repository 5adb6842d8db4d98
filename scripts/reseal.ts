/**
 * After rotating GANTRY_SIGNING_SECRET (the new value in GANTRY_SIGNING_SECRET,
 * the old one in GANTRY_PREVIOUS_SIGNING_SECRETS), moves every stored sealed
 * value to the new key. Then the old value can be removed from
 * GANTRY_PREVIOUS_SIGNING_SECRETS. It also binds to its row any value stored in
 * the form from before binding (say, after restoring an old backup), and lists
 * the values that do not open where they are (their key is gone, or they were
 * sealed for another row). Safe to run again; prints what it did.
 *
 *   GANTRY_SIGNING_SECRET=… GANTRY_PREVIOUS_SIGNING_SECRETS=… DATABASE_URL=… node --require tsx/cjs scripts/reseal.ts
 */
import { loadConfig, requireDatabaseUrl } from '../platform/config';
import { exitOnStartupError, ownerOnlyFiles } from '../platform/lifecycle';
import { createLogger } from '../platform/logger';
import { createPool } from '../db/pool';
import { resealStoredValues } from '../db/sealed-values';

async function main() {
  ownerOnlyFiles();
  const config = loadConfig();
  if (!config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not set: there is no key to seal with.');
  const db = createPool(requireDatabaseUrl(config));
  try {
    const report = await resealStoredValues(db, config.keyring);
    process.stdout.write(JSON.stringify({ current_key_id: config.keyring.currentKeyId, ...report }) + '\n');
    if (report.unreadable.length) process.exitCode = 1;
  } finally {
    await db.end();
  }
}

main().catch(exitOnStartupError(createLogger('reseal')));
