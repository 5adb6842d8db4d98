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
 * A key id is derived too (8 bytes of HKDF output, shown as 16 hex digits): it
 * says which root sealed a value without saying anything about the root.
 *
 * Sealed values: 'GK' || key id (8) || iv (12) || tag (16) || ciphertext. Values
 * sealed before key ids existed (iv || tag || ciphertext, same sealing key) are
 * still opened, by trying each key.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

const MAGIC = Buffer.from('GK');
const KEY_ID_BYTES = 8;

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

function open(key: Buffer, iv: Buffer, tag: Buffer, body: Buffer): string {
  const decipher = createDecipheriv('aes-256-gcm', key, iv);
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(body), decipher.final()]).toString('utf8');
}

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

  seal(value: string): Buffer {
    const key = this.keys[0];
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key.sealing, iv);
    const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
    return Buffer.concat([MAGIC, Buffer.from(key.id, 'hex'), iv, cipher.getAuthTag(), body]);
  }

  /** The id of the key that sealed `sealed`; undefined for a value sealed before key ids. */
  keyIdOf(sealed: Buffer): string | undefined {
    if (sealed.length < MAGIC.length + KEY_ID_BYTES + 28 || !sealed.subarray(0, 2).equals(MAGIC)) return undefined;
    const id = sealed.subarray(2, 2 + KEY_ID_BYTES).toString('hex');
    return this.keys.some((k) => k.id === id) ? id : undefined;
  }

  unseal(sealed: Buffer): string {
    const id = this.keyIdOf(sealed);
    if (id) {
      const key = this.keys.find((k) => k.id === id)!;
      const at = MAGIC.length + KEY_ID_BYTES;
      return open(
        key.sealing,
        sealed.subarray(at, at + 12),
        sealed.subarray(at + 12, at + 28),
        sealed.subarray(at + 28),
      );
    }
    // A value sealed before key ids (or under a key id this ring lacks, which then fails here too).
    for (const key of this.keys) {
      try {
        return open(key.sealing, sealed.subarray(0, 12), sealed.subarray(12, 28), sealed.subarray(28));
      } catch {
        // not this key
      }
    }
    throw new SealedValueUnreadable(
      'A stored secret was sealed with a key this installation no longer has: put its GANTRY_SIGNING_SECRET ' +
        'back in GANTRY_PREVIOUS_SIGNING_SECRETS, or set the secret again.',
    );
  }

  /** Whether `sealed` is under the current key (reseal moves the others). */
  isCurrent(sealed: Buffer): boolean {
    return this.keyIdOf(sealed) === this.currentKeyId;
  }
}
