/**
 * The installation's keys (platform/keyring.ts): signing and sealing keys are
 * separate, sealed values name their key and are bound to their place, and a
 * rotation keeps what was sealed and signed before it readable until the old
 * root is dropped.
 */
import assert from 'node:assert/strict';
import { createCipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';

import { Keyring, SealedValueUnreadable } from '../../platform/keyring';

const OLD = 'o'.repeat(40);
const NEW = 'n'.repeat(40);
const HERE = 'row A';
const THERE = 'row B';

const sealingKey = (root: string) => Buffer.from(hkdfSync('sha256', root, 'gantry', 'deployment-secrets', 32));

/** A value sealed the way Gantry sealed before key ids: iv || tag || ciphertext. */
function sealedBeforeKeyIds(root: string, value: string): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', sealingKey(root), iv);
  const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]);
}

/** A value sealed the way Gantry sealed before binding: 'GK' || key id || iv || tag || ciphertext, no place. */
function sealedBeforeBinding(root: string, value: string): Buffer {
  const keyId = Buffer.from(hkdfSync('sha256', root, 'gantry', 'key-id', 8));
  return Buffer.concat([Buffer.from('GK'), keyId, sealedBeforeKeyIds(root, value)]);
}

describe('keyring', () => {
  test('a sealed value names its key; it opens with that key only', () => {
    const before = new Keyring(OLD);
    const sealed = before.seal('hunter2', HERE);
    assert.equal(before.keyIdOf(sealed), before.currentKeyId);
    assert.ok(!sealed.includes(Buffer.from('hunter2')), 'the value is not in the clear');
    assert.equal(before.unseal(sealed, HERE), 'hunter2');
    assert.throws(() => new Keyring(NEW).unseal(sealed, HERE), SealedValueUnreadable);
  });

  test('a value sealed for one place does not open at another', () => {
    const keys = new Keyring(OLD);
    const sealed = keys.seal('row A’s token', HERE);
    assert.throws(() => keys.unseal(sealed, THERE), SealedValueUnreadable);
    assert.throws(() => new Keyring(NEW, [OLD]).unseal(sealed, THERE), SealedValueUnreadable, 'after a rotation too');
    assert.equal(keys.unseal(sealed, HERE), 'row A’s token');
  });

  test('after a rotation, old values open; new ones are sealed under the new key', () => {
    const sealedOld = new Keyring(OLD).seal('old value', HERE);
    const rotated = new Keyring(NEW, [OLD]);
    assert.equal(rotated.unseal(sealedOld, HERE), 'old value');
    assert.equal(rotated.isCurrent(sealedOld), false);
    const sealedNew = rotated.seal('new value', HERE);
    assert.equal(rotated.isCurrent(sealedNew), true);
    assert.equal(new Keyring(NEW).unseal(sealedNew, HERE), 'new value', 'the old root is not needed for it');
    assert.notEqual(new Keyring(OLD).currentKeyId, rotated.currentKeyId);
  });

  test('values sealed without a place open only once bound to one, under the key that sealed them', () => {
    for (const old of [sealedBeforeBinding(OLD, 'legacy'), sealedBeforeKeyIds(OLD, 'legacy')]) {
      const rotated = new Keyring(NEW, [OLD]);
      assert.throws(() => rotated.unseal(old, HERE), SealedValueUnreadable, 'an unbound value never opens as stored');
      const bound = rotated.bind(old, HERE);
      assert.equal(rotated.unseal(bound, HERE), 'legacy');
      assert.throws(() => rotated.unseal(bound, THERE), SealedValueUnreadable);
      assert.equal(rotated.keyIdOf(bound), new Keyring(OLD).currentKeyId, 'binding keeps the key');
      assert.equal(new Keyring(OLD).bind(old, HERE).length, bound.length);
      assert.throws(() => new Keyring(NEW).bind(old, HERE), SealedValueUnreadable, 'without the old root');
    }
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
    assert.notEqual(signature, createHmac('sha256', sealingKey(OLD)).update('v1\nfile-1').digest('hex'));
  });
});
