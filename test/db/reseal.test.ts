/**
 * scripts/reseal.ts's work (db/sealed-values.ts): after a rotation, stored
 * secrets move to the current key, so the old root can be dropped; a value no
 * key opens is reported and left alone.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Keyring } from '../../platform/keyring';
import { getSecret, insertSecret, sealedSecrets } from '../../db/deployments';
import { migrate } from '../../db/migrate';
import { resealStoredValues } from '../../db/sealed-values';
import { withScratchDatabase } from '../helpers/scratch-database';
import { createTenant } from '../helpers/tenants';

const OLD = 'o'.repeat(40);
const NEW = 'n'.repeat(40);
const LOST = 'l'.repeat(40);

test('reseal moves every stored secret to the current key, and reports what no key opens', async () => {
  await withScratchDatabase(async (db) => {
    await migrate(db);
    const t = await createTenant(db);
    const put = (name: string, sealed: Buffer) =>
      insertSecret(db, { id: `sec-${name}`, projectId: t.projectId, name, sealed, by: t.userId });
    await put('from-old', new Keyring(OLD).seal('old secret'));
    await put('from-new', new Keyring(NEW).seal('new secret'));
    await put('from-lost', new Keyring(LOST).seal('lost secret'));

    const rotated = new Keyring(NEW, [OLD]);
    const report = await resealStoredValues(db, rotated);
    assert.deepEqual(report, {
      resealed: { deployment_secrets: 1, registry_uploads: 0 },
      unreadable: ['deployment_secrets/sec-from-lost'],
    });
    assert.ok(await getSecret(db, t.projectId, 'from-lost'), 'an unreadable value is left, not deleted');

    // The old root is no longer needed for what was resealed.
    const withoutOld = new Keyring(NEW);
    const sealed = await sealedSecrets(db, t.projectId, ['from-old', 'from-new']);
    assert.equal(withoutOld.unseal(sealed.get('from-old')!), 'old secret');
    assert.equal(withoutOld.unseal(sealed.get('from-new')!), 'new secret');
    assert.deepEqual(
      (await resealStoredValues(db, rotated)).resealed.deployment_secrets,
      0,
      'a second run moves nothing',
    );
  });
});
