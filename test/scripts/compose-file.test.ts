/**
 * docker-compose.yml as far as it can be checked without a container engine (none runs where the
 * tests run): it is a valid Compose file by the Compose Specification's own schema
 * (deploy/compose-spec.json), what it refers to exists (services it depends on, named volumes,
 * the build context's Dockerfile, files it mounts), and every variable it gives a Gantry process is
 * one Gantry reads: a misspelt name would otherwise be ignored without a word.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import { CONFIG_VARIABLES, loadConfig } from '../../platform/config';
import { MODEL_SERVER_PYTHON, MODEL_SERVER_PYTHONPATH } from '../../shared/model-server-image';

const ROOT = path.resolve(__dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

interface Service {
  image?: string;
  build?: string | { context: string; dockerfile?: string };
  depends_on?: string[] | Record<string, unknown>;
  environment?: Record<string, unknown>;
  volumes?: Array<string | { type?: string; source?: string }>;
}
interface ComposeFile {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

/** The file as compose reads it: anchors merged, and `${VAR:?…}` (required, no default) set. */
function composeFile(): ComposeFile {
  const text = read('docker-compose.yml').replace(/\$\{(\w+):\?[^}]*\}/g, 'x'.repeat(64));
  return parse(text, { merge: true }) as ComposeFile;
}

test('docker-compose.yml is a valid Compose file by the Compose Specification schema', () => {
  // Draft-07 (Ajv's default); the schema names it by an https URL Ajv does not know, so that is left out.
  const { $schema: _draft, ...schema } = JSON.parse(read('deploy/compose-spec.json'));
  const ajv = new Ajv({ allErrors: true, strict: false });
  const validate = ajv.compile(schema);
  const file = composeFile();
  assert.ok(validate(file), JSON.stringify(validate.errors, null, 2));

  // The check can fail: a key compose does not know is refused.
  const broken = structuredClone(file);
  (broken.services.api as Record<string, unknown>).restart_policy = 'always';
  assert.equal(validate(broken), false);
});

test('what docker-compose.yml refers to exists', () => {
  const { services, volumes = {} } = composeFile();
  for (const [name, s] of Object.entries(services)) {
    const deps = Array.isArray(s.depends_on) ? s.depends_on : Object.keys(s.depends_on ?? {});
    for (const d of deps) assert.ok(services[d], `${name} depends on ${d}, which is not a service`);
    if (s.build) {
      const context = typeof s.build === 'string' ? s.build : s.build.context;
      const dockerfile = (typeof s.build === 'object' && s.build.dockerfile) || 'Dockerfile';
      assert.ok(existsSync(path.join(ROOT, context, dockerfile)), `${name} builds from a missing ${dockerfile}`);
    }
    for (const v of s.volumes ?? []) {
      const source = typeof v === 'string' ? v.split(':')[0] : v.source;
      if (!source) continue;
      if (source.startsWith('.') || source.startsWith('/')) {
        if (source.startsWith('.')) assert.ok(existsSync(path.join(ROOT, source)), `${name} mounts missing ${source}`);
      } else {
        assert.ok(source in volumes, `${name} mounts volume ${source}, which is not declared`);
      }
    }
  }
});

test("every variable docker-compose.yml gives a Gantry process is one Gantry's configuration reads", () => {
  const { services } = composeFile();
  const gantry = Object.entries(services).filter(([, s]) => s.image === 'gantry:local');
  assert.ok(gantry.length >= 5, 'the API, the gateway and the workers run the Gantry image');
  for (const [name, s] of gantry) {
    for (const variable of Object.keys(s.environment ?? {})) {
      assert.ok(CONFIG_VARIABLES.has(variable), `${name} sets ${variable}, which Gantry does not read`);
    }
  }
});

test("each Gantry service's environment, as compose gives it with nothing set but the secret, is a configuration Gantry starts with", () => {
  // `${VAR:-default}` becomes its default ('' for `${VAR:-}`, which YAML then reads as null), as
  // compose interpolates it unset.
  const text = read('docker-compose.yml')
    .replace(/\$\{(\w+):\?[^}]*\}/g, 'x'.repeat(64))
    .replace(/\$\{\w+:-([^}]*)\}/g, '$1');
  const { services } = parse(text, { merge: true }) as ComposeFile;
  for (const [name, s] of Object.entries(services).filter(([, s]) => s.image === 'gantry:local')) {
    const env = Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, String(v ?? '')]));
    assert.doesNotThrow(() => loadConfig(env), `${name}: ${JSON.stringify(env)}`);
  }
});

test('the Gantry image has the model server where GANTRY_MODEL_SERVER_IMAGE is run from', () => {
  // docker-compose serves endpoints from the Gantry image itself: the command and PYTHONPATH
  // endpoint-serving.ts gives an image must be where the Dockerfile puts the trainer's Python and code.
  const dockerfile = read('Dockerfile');
  const venv = path.posix.dirname(path.posix.dirname(MODEL_SERVER_PYTHON));
  assert.match(dockerfile, new RegExp(`python3 -m venv ${venv}\\b`));
  assert.match(dockerfile, /^WORKDIR \/app$/m);
  assert.match(dockerfile, /^COPY \. \.$/m);
  assert.equal(MODEL_SERVER_PYTHONPATH, '/app/trainers/reference');
  assert.ok(existsSync(path.join(ROOT, 'trainers/reference/gantry_trainer/serve.py')));
});
