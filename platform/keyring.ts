/**
 * The installation's keys. Roots come from GANTRY_SIGNING_SECRET (the current
 * one) and GANTRY_PREVIOUS_SIGNING_SECRETS (older ones, still accepted after a
 * rotation). From each root, HKDF-SHA256 derives two keys that share nothing:
 *
 * - a signing key: HMAC-SHA256 of pre-signed upload and download URLs. New
 *   URLs are signed with the current key; a URL signed with a previous one is
 *   still accepted until it expires.
 * - a sealing key: AES-256-GCM of stored secrets (deployment secrets, source
 *   tokens of model uploads). A sealed value names its key by id, so after a
 *   rotation each value is opened with the key that sealed it, and
 *   `scripts/reseal.ts` moves stored values to the current key, after which the
 *   old root can be dropped.
 *
 * A sealed value is bound to where it is stored: GCM's associated data is a
 * string naming its place (db/sealed-values.ts: table, column, project, row),
 * and it opens only with that same string. A value copied into another row (by
 * an SQL injection elsewhere, a restore, a buggy move) does not open there.
 *
 * A key id is derived too (8 bytes of HKDF output, shown as 16 hex digits): it
 * says which root sealed a value without saying anything about the root.
 *
 * Sealed values: 'GB' || key id (8) || iv (12) || tag (16) || ciphertext, with
 * the place as associated data. Two older forms carry no place: 'GK' || key id
 * || iv || tag || ciphertext, and before key ids iv || tag || ciphertext. They
 * never open as stored values; `bind` turns one into a bound value of the row it
 * is in (db/sealed-values.ts does that for every stored value when a process
 * starts), so what was stored before binding keeps working.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

/** A value sealed with its place as associated data. */
const BOUND = Buffer.from('GB');
/** A value sealed with a key id but no place (before binding). */
const UNBOUND = Buffer.from('GK');
const KEY_ID_BYTES = 8;
const HEADER_BYTES = BOUND.length + KEY_ID_BYTES;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class SealedValueUnreadable extends Error {}

interface KeyVersion {
  id: string;
  signing: Buffer;
  sealing: Buffer;
}

function derive(root: string, info: string, bytes: number): Buffer {
  return Buffer.from(hkdfSync('sha256', root, 'gantry', info, bytes));
}

function keyVersion(root: string): KeyVersion {
  return {
    id: derive(root, 'key-id', KEY_ID_BYTES).toString('hex'),
    signing: derive(root, 'url-signing', 32),
    // The label sealed values have used since before key ids: old values open with the same key.
    sealing: derive(root, 'deployment-secrets', 32),
  };
}

/** Opens iv || tag || ciphertext; `place` is the associated data it was sealed with, if any. */
function open(key: Buffer, box: Buffer, place?: string): string {
  const decipher = createDecipheriv('aes-256-gcm', key, box.subarray(0, IV_BYTES));
  decipher.setAuthTag(box.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  if (place !== undefined) decipher.setAAD(Buffer.from(place, 'utf8'));
  return Buffer.concat([decipher.update(box.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
}

function sealWith(key: KeyVersion, value: string, place: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key.sealing, iv);
  cipher.setAAD(Buffer.from(place, 'utf8'));
  const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
  return Buffer.concat([BOUND, Buffer.from(key.id, 'hex'), iv, cipher.getAuthTag(), body]);
}

const LOST_KEY =
  'A stored secret was sealed with a key this installation no longer has: put its GANTRY_SIGNING_SECRET ' +
  'back in GANTRY_PREVIOUS_SIGNING_SECRETS, or set the secret again.';

export class Keyring {
  private readonly keys: KeyVersion[];

  /** `current` seals and signs; `previous` (newest first) only open and verify. */
  constructor(current: string, previous: string[] = []) {
    this.keys = [current, ...previous.filter((p) => p !== current)].map(keyVersion);
  }

  /** The id of the key that seals now. */
  get currentKeyId(): string {
    return this.keys[0].id;
  }

  /** HMAC-SHA256 of `payload` with the current signing key, as hex. */
  sign(payload: string): string {
    return createHmac('sha256', this.keys[0].signing).update(payload).digest('hex');
  }

  /** Whether `signatureHex` is `payload`'s signature under any key of the ring (current or previous). */
  verify(payload: string, signatureHex: string): boolean {
    const given = Buffer.from(signatureHex, 'hex');
    return this.keys.some((k) => {
      const expected = createHmac('sha256', k.signing).update(payload).digest();
      return expected.length === given.length && timingSafeEqual(expected, given);
    });
  }

  /** `value` sealed under the current key, bound to `place`: it opens with that place only. */
  seal(value: string, place: string): Buffer {
    return sealWith(this.keys[0], value, place);
  }

  /** Whether `sealed` is bound to a place (the form `seal` makes). */
  isBound(sealed: Buffer): boolean {
    return sealed.length >= HEADER_BYTES + IV_BYTES + TAG_BYTES && sealed.subarray(0, 2).equals(BOUND);
  }

  /** The id of the key that sealed `sealed`, if this ring has it; undefined for a value sealed before key ids. */
  keyIdOf(sealed: Buffer): string | undefined {
    const magic = sealed.subarray(0, 2);
    if (sealed.length < HEADER_BYTES + IV_BYTES + TAG_BYTES || !(magic.equals(BOUND) || magic.equals(UNBOUND)))
      return undefined;
    const id = sealed.subarray(2, HEADER_BYTES).toString('hex');
    return this.keys.some((k) => k.id === id) ? id : undefined;
  }

  /**
   * The value sealed at `place`. A value sealed for another place, one changed since, and one in
   * a form without a place (see `bind`) do not open: SealedValueUnreadable.
   */
  unseal(sealed: Buffer, place: string): string {
    if (!this.isBound(sealed)) {
      throw new SealedValueUnreadable(
        'A stored secret is in a form from before secrets were bound to where they are stored, and was not ' +
          'bound when this process started: run scripts/reseal.ts, or set the secret again.',
      );
    }
    const id = this.keyIdOf(sealed);
    if (!id) throw new SealedValueUnreadable(LOST_KEY);
    try {
      return open(this.keys.find((k) => k.id === id)!.sealing, sealed.subarray(HEADER_BYTES), place);
    } catch {
      throw new SealedValueUnreadable(
        'A stored secret does not open where it is stored (it was sealed for another place, or changed): ' +
          'set the secret again.',
      );
    }
  }

  /**
   * A value sealed without a place ('GK', or from before key ids), sealed again under the same
   * key and bound to `place`: for values stored before binding, each bound to the row it is in.
   * The key does not change (moving to the current key is `scripts/reseal.ts`'s work).
   */
  bind(sealed: Buffer, place: string): Buffer {
    const id = this.keyIdOf(sealed);
    // 'GK' names its key; a value from before key ids (whatever its first bytes happen to be) is
    // tried with each key.
    const tries: [KeyVersion, Buffer][] =
      id && sealed.subarray(0, 2).equals(UNBOUND)
        ? [[this.keys.find((k) => k.id === id)!, sealed.subarray(HEADER_BYTES)]]
        : this.keys.map((k) => [k, sealed]);
    for (const [key, box] of tries) {
      let value: string;
      try {
        value = open(key.sealing, box);
      } catch {
        continue; // not this key
      }
      return sealWith(key, value, place);
    }
    throw new SealedValueUnreadable(LOST_KEY);
  }

  /** Whether `sealed` is bound and under the current key (reseal moves the others). */
  isCurrent(sealed: Buffer): boolean {
    return this.isBound(sealed) && this.keyIdOf(sealed) === this.currentKeyId;
  }
}
