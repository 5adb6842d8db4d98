/**
 * The installation's keys (platform/keyring.ts): signing and sealing keys are
 * separate, sealed values name their key, and a rotation keeps what was sealed
 * and signed before it readable until the old root is dropped.
 */
import assert from 'node:assert/strict';
import { createCipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';

import { Keyring, SealedValueUnreadable } from '../../platform/keyring';

const OLD = 'o'.repeat(40);
const NEW = 'n'.repeat(40);

/** A value sealed the way Gantry sealed before key ids: iv || tag || ciphertext. */
function sealedBeforeKeyIds(root: string, value: string): Buffer {
  const key = Buffer.from(hkdfSync('sha256', root, 'gantry', 'deployment-secrets', 32));
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]);
}

describe('keyring', () => {
  test('a sealed value names its key; it opens with that key only', () => {
    const before = new Keyring(OLD);
    const sealed = before.seal('hunter2');
    assert.equal(before.keyIdOf(sealed), before.currentKeyId);
    assert.ok(!sealed.includes(Buffer.from('hunter2')), 'the value is not in the clear');
    assert.equal(before.unseal(sealed), 'hunter2');
    assert.throws(() => new Keyring(NEW).unseal(sealed), SealedValueUnreadable);
  });

  test('after a rotation, old values open; new ones are sealed under the new key', () => {
    const sealedOld = new Keyring(OLD).seal('old value');
    const rotated = new Keyring(NEW, [OLD]);
    assert.equal(rotated.unseal(sealedOld), 'old value');
    assert.equal(rotated.isCurrent(sealedOld), false);
    const sealedNew = rotated.seal('new value');
    assert.equal(rotated.isCurrent(sealedNew), true);
    assert.equal(new Keyring(NEW).unseal(sealedNew), 'new value', 'the old root is not needed for it');
    assert.notEqual(new Keyring(OLD).currentKeyId, rotated.currentKeyId);
  });

  test('values sealed before key ids still open, with the current or a previous root', () => {
    assert.equal(new Keyring(OLD).unseal(sealedBeforeKeyIds(OLD, 'legacy')), 'legacy');
    assert.equal(new Keyring(NEW, [OLD]).unseal(sealedBeforeKeyIds(OLD, 'legacy')), 'legacy');
    assert.throws(() => new Keyring(NEW).unseal(sealedBeforeKeyIds(OLD, 'legacy')), SealedValueUnreadable);
  });

  test('signatures: the current key signs, previous keys still verify, and the signing key is not the root', () => {
    const old = new Keyring(OLD);
    const signature = old.sign('v1\nfile-1');
    assert.equal(new Keyring(NEW, [OLD]).verify('v1\nfile-1', signature), true);
    assert.equal(new Keyring(NEW).verify('v1\nfile-1', signature), false);
    assert.equal(old.verify('v1\nfile-2', signature), false, 'another payload');
    assert.equal(old.verify('v1\nfile-1', 'ab'), false, 'a short signature');
    // Neither the root itself nor the sealing key signs: each purpose has its own derived key.
    assert.notEqual(signature, createHmac('sha256', OLD).update('v1\nfile-1').digest('hex'));
    const sealingKey = Buffer.from(hkdfSync('sha256', OLD, 'gantry', 'deployment-secrets', 32));
    assert.notEqual(signature, createHmac('sha256', sealingKey).update('v1\nfile-1').digest('hex'));
  });
});
