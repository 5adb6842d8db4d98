/**
 * The name wildcards of the v2 list `filter` (api/list-filter.ts globMatches), as the SDKs
 * describe them: `*` as a prefix or suffix wildcard (and, here, inside a name too); every other
 * character, regular-expression metacharacters included, stands for itself.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { globMatches } from '../../api/list-filter';

test('no wildcard: the whole name, exactly', () => {
  assert.equal(globMatches('chat', 'chat'), true);
  assert.equal(globMatches('chat', 'chat-v2'), false);
  assert.equal(globMatches('chat', 'my-chat'), false);
  assert.equal(globMatches('', ''), true);
  assert.equal(globMatches('', 'a'), false);
});

test('prefix, suffix and inner wildcards', () => {
  assert.equal(globMatches('chat*', 'chat'), true, 'a wildcard may stand for nothing');
  assert.equal(globMatches('chat*', 'chat-v2'), true);
  assert.equal(globMatches('chat*', 'my-chat'), false);
  assert.equal(globMatches('*-v2', 'chat-v2'), true);
  assert.equal(globMatches('*-v2', 'chat-v2-old'), false);
  assert.equal(globMatches('*chat*', 'my-chat-v2'), true);
  assert.equal(globMatches('chat*v2', 'chat-model-v2'), true);
  assert.equal(globMatches('chat*v2', 'chat-model-v3'), false);
  assert.equal(globMatches('*', ''), true);
  assert.equal(globMatches('**', 'anything'), true);
  assert.equal(globMatches('a*b*c', 'abc'), true);
  assert.equal(globMatches('a*b*c', 'acb'), false);
  assert.equal(globMatches('ab*ba', 'aba'), false, 'the prefix and the suffix may not overlap');
  assert.equal(globMatches('a*a', 'a'), false);
  assert.equal(globMatches('*ab*ab', 'xabyab'), true);
  assert.equal(globMatches('*ab*ab', 'xabab'), true);
  assert.equal(globMatches('*ab*ab', 'xab'), false);
  assert.equal(globMatches('*aa*aa', 'aaa'), false);
  assert.equal(globMatches('*aa*aa', 'aaaa'), true);
});

test('regular-expression metacharacters are plain characters', () => {
  assert.equal(globMatches('a.c', 'abc'), false);
  assert.equal(globMatches('a.c', 'a.c'), true);
  assert.equal(globMatches('(x|y)+', 'x'), false);
  assert.equal(globMatches('(x|y)+', '(x|y)+'), true);
  assert.equal(globMatches('[a-z]?$^\\', '[a-z]?$^\\'), true);
  assert.equal(globMatches('*.+*', 'v1.+beta'), true);
  assert.equal(globMatches('*.+*', 'v1-beta'), false);
});

test('a pattern of many wildcards on a long name is answered (no backtracking)', () => {
  // A RegExp of `.*`s takes time exponential in the wildcards here; this runs in a blink.
  const name = 'a'.repeat(10_000);
  assert.equal(globMatches(`${'*a'.repeat(100)}*b`, name), false);
  assert.equal(globMatches(`${'*a'.repeat(100)}*`, name), true);
});
