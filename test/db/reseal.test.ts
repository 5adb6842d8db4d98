/**
 * scripts/reseal.ts's work and the binding at start (db/sealed-values.ts):
 * after a rotation, stored secrets move to the current key, so the old root can
 * be dropped; values stored before binding are bound to their row; a value no
 * key opens where it is is reported and left alone.
 */
import assert from 'node:assert/strict';
import { createCipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { test } from 'node:test';

import { Keyring } from '../../platform/keyring';
import { createLogger } from '../../platform/logger';
import { getSecret, insertSecret, sealedSecrets } from '../../db/deployments';
import { migrate } from '../../db/migrate';
import type { Db } from '../../db/pool';
import {
  bindStoredValuesOnce,
  openFromRow,
  resealStoredValues,
  SEALED_COLUMNS,
  sealForRow,
} from '../../db/sealed-values';
import { LogCapture } from '../helpers/platform';
import { withScratchDatabase } from '../helpers/scratch-database';
import { createTenant, type Tenant } from '../helpers/tenants';

const OLD = 'o'.repeat(40);
const NEW = 'n'.repeat(40);
const LOST = 'l'.repeat(40);
const SECRETS = SEALED_COLUMNS.deploymentSecret;

/** A value as Gantry sealed it before binding: 'GK' || key id || iv || tag || ciphertext, no place. */
function sealedBeforeBinding(root: string, value: string): Buffer {
  const keyId = Buffer.from(hkdfSync('sha256', root, 'gantry', 'key-id', 8));
  const key = Buffer.from(hkdfSync('sha256', root, 'gantry', 'deployment-secrets', 32));
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
  return Buffer.concat([Buffer.from('GK'), keyId, iv, cipher.getAuthTag(), body]);
}

const rowOf = (t: Tenant, name: string) => ({ id: `sec-${name}`, projectId: t.projectId });

async function put(db: Db, t: Tenant, name: string, sealed: (row: { id: string; projectId: string }) => Buffer) {
  await insertSecret(db, { ...rowOf(t, name), name, sealed: sealed(rowOf(t, name)), by: t.userId });
}

async function opened(db: Db, keyring: Keyring, t: Tenant, name: string): Promise<string> {
  const box = (await sealedSecrets(db, t.projectId, [name])).get(name)!;
  return openFromRow(keyring, SECRETS, { id: box.id, projectId: t.projectId }, box.sealed);
}

test('reseal moves every stored secret to the current key and binds old ones; it reports what does not open', async () => {
  await withScratchDatabase(async (db) => {
    await migrate(db);
    const t = await createTenant(db);
    await put(db, t, 'from-old', (row) => sealForRow(new Keyring(OLD), SECRETS, row, 'old secret'));
    await put(db, t, 'from-new', (row) => sealForRow(new Keyring(NEW), SECRETS, row, 'new secret'));
    await put(db, t, 'from-lost', (row) => sealForRow(new Keyring(LOST), SECRETS, row, 'lost secret'));
    await put(db, t, 'unbound', () => sealedBeforeBinding(OLD, 'unbound secret'));
    // A value sealed for another row, copied here: it is not this row's.
    await put(db, t, 'moved', () => sealForRow(new Keyring(NEW), SECRETS, rowOf(t, 'from-new'), 'new secret'));

    const rotated = new Keyring(NEW, [OLD]);
    const report = await resealStoredValues(db, rotated);
    assert.deepEqual(report.resealed, { deployment_secrets: 2, registry_uploads: 0 });
    assert.deepEqual(report.unreadable.sort(), ['deployment_secrets/sec-from-lost', 'deployment_secrets/sec-moved']);
    assert.ok(await getSecret(db, t.projectId, 'from-lost'), 'an unreadable value is left, not deleted');

    // The old root is no longer needed for what was resealed.
    const withoutOld = new Keyring(NEW);
    assert.equal(await opened(db, withoutOld, t, 'from-old'), 'old secret');
    assert.equal(await opened(db, withoutOld, t, 'from-new'), 'new secret');
    assert.equal(await opened(db, withoutOld, t, 'unbound'), 'unbound secret');
    assert.deepEqual(
      (await resealStoredValues(db, rotated)).resealed.deployment_secrets,
      0,
      'a second run moves nothing',
    );
  });
});

test('at start, values stored before binding are bound to their row under their own key, once', async () => {
  await withScratchDatabase(async (db) => {
    await migrate(db);
    const t = await createTenant(db);
    await put(db, t, 'stored-before', () => sealedBeforeBinding(OLD, 'kept'));
    await put(db, t, 'lost', () => sealedBeforeBinding(LOST, 'gone'));
    const keyring = new Keyring(NEW, [OLD]);
    const logs = new LogCapture();
    await assert.rejects(opened(db, keyring, t, 'stored-before'), /before secrets were bound/, 'not yet bound');

    await bindStoredValuesOnce(db, keyring, createLogger('test', 'info', logs));
    assert.equal(await opened(db, new Keyring(OLD), t, 'stored-before'), 'kept', 'bound under the key that sealed it');
    assert.match(logs.text(), /sec-lost/, 'what no key opens is named in the log');
    assert.doesNotMatch(logs.text(), /kept|gone/, 'no value in the log');

    // Once done, an unbound value written into a row later is not bound by a start.
    await put(db, t, 'written-later', () => sealedBeforeBinding(OLD, 'from an old backup'));
    await bindStoredValuesOnce(db, keyring, createLogger('test', 'info', logs));
    await assert.rejects(opened(db, keyring, t, 'written-later'), /before secrets were bound/);
  });
});
