/**
 * A podman container host gives each replica its own user namespace from the subordinate ids of
 * the user `containers`; without such ids it refuses to start, saying what to add, rather than
 * run tenants' containers as the host's root. (That replicas do run under such ids is
 * podman-isolation.test.ts's.)
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { subordinateIdsMissing } from '../../providers/containers/podman/podman-engine';

const dir = mkdtempSync(path.join(tmpdir(), 'gantry-subids-'));
function idFile(name: string, text: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

test('a subordinate id file must give the user containers a range of at least 65,536 ids', () => {
  assert.equal(
    subordinateIdsMissing(idFile('good', 'alice:100000:65536\ncontainers:2147483647:2147483648\n')),
    undefined,
  );
  assert.equal(subordinateIdsMissing(idFile('exact', 'containers:200000:65536')), undefined);

  const missing = path.join(dir, 'absent');
  assert.equal(subordinateIdsMissing(missing), `${missing} does not exist`);
  for (const [name, text] of [
    ['empty', ''],
    ['others-only', 'alice:100000:65536\n'],
    ['too-small', 'containers:200000:1000\n'],
    ['malformed', 'containers:200000\n'],
    ['a-user-named-like-it', 'containers2:200000:65536\n'],
  ]) {
    const file = idFile(name, text);
    assert.equal(
      subordinateIdsMissing(file),
      `${file} gives the user containers no range of at least 65536 ids`,
      `${name}: ${JSON.stringify(text)}`,
    );
  }
});
