/**
 * Sealing of stored secrets (deployment secrets): AES-256-GCM with a key
 * derived (HKDF-SHA256) from GANTRY_SIGNING_SECRET, which every Gantry process
 * of an installation shares. A sealed value is iv || tag || ciphertext.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

function keyFrom(secret: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, 'gantry', 'deployment-secrets', 32));
}

export function seal(secret: string, value: string): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyFrom(secret), iv);
  const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]);
}

export function unseal(secret: string, sealed: Buffer): string {
  const decipher = createDecipheriv('aes-256-gcm', keyFrom(secret), sealed.subarray(0, 12));
  decipher.setAuthTag(sealed.subarray(12, 28));
  return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]).toString('utf8');
}
