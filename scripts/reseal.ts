/**
 * After rotating GANTRY_SIGNING_SECRET (the new value in GANTRY_SIGNING_SECRET,
 * the old one in GANTRY_PREVIOUS_SIGNING_SECRETS), moves every stored sealed
 * value to the new key. Then the old value can be removed from
 * GANTRY_PREVIOUS_SIGNING_SECRETS. Safe to run again; prints what it did.
 *
 *   GANTRY_SIGNING_SECRET=… GANTRY_PREVIOUS_SIGNING_SECRETS=… DATABASE_URL=… node --import tsx scripts/reseal.ts
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
