/**
 * The translation step out of English (providers/speech/apertium.ts) with the real Apertium: lines
 * come back in order and in number, one per segment; a speech host without Apertium, or a language
 * without a pair, says so (the API makes that a 503) instead of answering English or nothing.
 */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { TranslationUnavailable, translateFromEnglish } from '../../providers/speech/apertium';

test('each line is translated, in order, and none is lost or merged', async () => {
  const lines = ['Hello world.', '', 'The weather is good today.', 'Two sentences. On one line.'];
  const es = await translateFromEnglish(lines, 'es');
  assert.equal(es.length, lines.length);
  assert.equal(es[0], 'Hola Mundo.');
  assert.equal(es[1], '', 'a blank line stays blank');
  assert.ok(es[2].includes('tiempo') && es[2].includes('hoy'), es[2]);
  assert.ok(es[3].includes('frases') && es[3].split('.').length === 3, es[3]);
  assert.deepEqual(await translateFromEnglish([], 'es'), []);
  assert.equal((await translateFromEnglish(['Hello world.'], 'gl'))[0], 'Ola Mundo.');
  assert.match((await translateFromEnglish(['I like to drink coffee.'], 'eo'))[0], /kafon/);
});

test('without Apertium, or for a language without a pair, the step says so', async () => {
  await assert.rejects(translateFromEnglish(['Hello.'], 'fr'), TranslationUnavailable);
  const path0 = process.env.PATH;
  process.env.PATH = mkdtempSync(path.join(tmpdir(), 'no-apertium-'));
  try {
    await assert.rejects(translateFromEnglish(['Hello.'], 'es'), (err: Error) => {
      assert.ok(err instanceof TranslationUnavailable);
      assert.match(err.message, /Apertium is not installed/);
      return true;
    });
  } finally {
    process.env.PATH = path0;
  }
});
