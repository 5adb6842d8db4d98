/**
 * docker-compose.yml as an operator runs it: the signing secret has no default
 * (compose refuses to start without it) and reaches every process that signs or
 * unseals with it; Gantry itself refuses a value that was ever published here.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { ConfigError, loadConfig } from '../../platform/config';

const COMPOSE = readFileSync(path.resolve(__dirname, '../../docker-compose.yml'), 'utf8');
type Service = { environment?: Record<string, string> };
const services = (parse(COMPOSE, { merge: true }) as { services: Record<string, Service> }).services;

describe('the signing secret in docker-compose', () => {
  test('has no default, and the API and the control workers get the same required value', () => {
    for (const name of ['api', 'worker-control']) {
      const value = services[name].environment?.GANTRY_SIGNING_SECRET;
      assert.match(String(value), /^\$\{GANTRY_SIGNING_SECRET:\?.+\}$/, `${name}: required, no default`);
    }
    for (const [name, s] of Object.entries(services)) {
      const value = s.environment?.GANTRY_SIGNING_SECRET;
      if (value !== undefined) assert.doesNotMatch(String(value), /:-/, `${name} has no fallback value`);
    }
  });

  test('a published example value is refused at start, naming the variable', () => {
    assert.throws(
      () => loadConfig({ GANTRY_SIGNING_SECRET: 'dev-only-signing-secret-change-me-0123456789' }),
      (err) => err instanceof ConfigError && /GANTRY_SIGNING_SECRET: is a published example value/.test(err.message),
    );
    assert.ok(loadConfig({ GANTRY_SIGNING_SECRET: 'a'.repeat(64) }).keyring, 'a random value is taken');
    assert.throws(
      () =>
        loadConfig({
          GANTRY_SIGNING_SECRET: 'a'.repeat(64),
          GANTRY_PREVIOUS_SIGNING_SECRETS: 'dev-only-signing-secret-change-me-0123456789',
        }),
      (err) => err instanceof ConfigError && /GANTRY_PREVIOUS_SIGNING_SECRETS/.test(err.message),
      'nor as a previous secret',
    );
  });
});
