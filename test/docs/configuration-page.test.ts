/**
 * The operators' configuration page is the settings themselves: docs/operators/configuration.md is
 * exactly what scripts/lib/configuration-page.ts makes from platform/config.ts's SETTINGS, so a
 * setting added, removed, re-defaulted or re-documented there without the page written again fails
 * here. Pure: reads files only.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { SETTINGS } from '../../platform/config';
import { CONFIGURATION_PAGE, configurationPage } from '../../scripts/lib/configuration-page';

test('docs/operators/configuration.md is written from platform/config.ts', async () => {
  assert.equal(
    readFileSync(CONFIGURATION_PAGE, 'utf8'),
    await configurationPage(),
    'the page is out of date: run `npx tsx scripts/write-configuration-page.ts`',
  );
});

test('the page names every setting once, with its default as the parser applies it', () => {
  const page = readFileSync(CONFIGURATION_PAGE, 'utf8');
  for (const s of SETTINGS) {
    const rows = page.split('\n').filter((line) => line.startsWith(`| \`${s.variable}\` `));
    assert.equal(rows.length, 1, `${s.variable}: ${rows.length} rows`);
  }
  // Two defaults checked against what loadConfig gives with nothing set (the user's view of "default").
  const row = (variable: string) => page.split('\n').find((line) => line.startsWith(`| \`${variable}\` `))!;
  assert.match(row('GANTRY_API_PORT'), /\| `8080` +\|/);
  assert.match(row('GANTRY_MAX_UPLOAD_BYTES'), /\| `26843545600` \(25 GiB\) +\|/);
});
