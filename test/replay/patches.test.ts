/**
 * Versioning held to its promise, from the files alone:
 *
 *  - every `patched()` call in workflow code names an entry of
 *    workflows/patches.ts (no bare string ids to drift);
 *  - every entry has a recorded history of its workflow type that took the
 *    new branch (it carries the entry's marker) and one recorded before the
 *    patch (a history of that type without the marker), so replay covers both;
 *  - every marker in a recorded history is a known entry;
 *  - recorded histories are never modified or deleted: each is listed with
 *    its SHA-256 in histories/SHA256SUMS, which only ever grows (add a line
 *    for a new history: `sha256sum NAME.json >> SHA256SUMS` in that folder).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { PATCHES } from '../../workflows/patches';

const ROOT = path.resolve(__dirname, '..', '..');
const DIR = path.join(__dirname, 'histories');
const MANIFEST = path.join(DIR, 'SHA256SUMS');

interface Recorded {
  file: string;
  type: string;
  patches: Set<string>;
}

function readHistory(file: string): Recorded {
  const history = historyFromJSON(JSON.parse(readFileSync(path.join(DIR, file), 'utf8')));
  const type = history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name ?? '';
  const patches = new Set<string>();
  for (const e of history.events ?? []) {
    const m = e.markerRecordedEventAttributes;
    if (m?.markerName !== 'core_patch') continue;
    const data = m.details?.['patch-data']?.payloads?.[0]?.data;
    if (data) patches.add((JSON.parse(Buffer.from(data).toString('utf8')) as { id: string }).id);
  }
  return { file, type, patches };
}

const files = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .sort();
const recorded = files.map(readHistory);

function workflowSources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return workflowSources(full);
    return name.endsWith('.ts') ? [full] : [];
  });
}

describe('workflow versioning', () => {
  test('every patched() call names an entry of workflows/patches.ts', () => {
    const bare: string[] = [];
    for (const file of [
      ...workflowSources(path.join(ROOT, 'workflows')),
      ...workflowSources(path.join(ROOT, 'shared')),
    ]) {
      if (file.endsWith(`${path.sep}patches.ts`)) continue; // the table itself, whose comments name the call
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/\b(?:patched|deprecatePatch)\(\s*([^)]*)\)/g)) {
        if (!/^PATCHES\.\w+\.id$/.test(m[1].trim())) bare.push(`${path.relative(ROOT, file)}: ${m[0]}`);
      }
    }
    assert.deepEqual(bare, []);
  });

  test('patch ids are unique', () => {
    const ids = Object.values(PATCHES).map((p) => p.id);
    assert.deepEqual(ids, [...new Set(ids)]);
  });

  for (const [name, patch] of Object.entries(PATCHES)) {
    test(`${name} (${patch.id}) has a recorded ${patch.workflow} history on each side`, () => {
      const ofType = recorded.filter((r) => r.type === patch.workflow);
      const withMarker = ofType.filter((r) => r.patches.has(patch.id)).map((r) => r.file);
      const without = ofType.filter((r) => !r.patches.has(patch.id)).map((r) => r.file);
      assert.ok(
        withMarker.length > 0,
        `no recorded ${patch.workflow} history took the patched branch of '${patch.id}'`,
      );
      assert.ok(without.length > 0, `no recorded ${patch.workflow} history from before '${patch.id}'`);
    });
  }

  test('every marker in a recorded history is a known patch', () => {
    const known = new Set<string>(Object.values(PATCHES).map((p) => p.id));
    const unknown = recorded.flatMap((r) =>
      [...r.patches].filter((id) => !known.has(id)).map((id) => `${r.file}: ${id}`),
    );
    assert.deepEqual(unknown, []);
  });

  test('recorded histories are never modified or deleted (SHA256SUMS)', () => {
    const listed = new Map(
      readFileSync(MANIFEST, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => {
          const [sum, name] = line.split(/\s+\*?/);
          return [name, sum] as const;
        }),
    );
    const problems: string[] = [];
    for (const [name, sum] of listed) {
      if (!files.includes(name)) {
        problems.push(`${name} was deleted`);
        continue;
      }
      const actual = createHash('sha256')
        .update(readFileSync(path.join(DIR, name)))
        .digest('hex');
      if (actual !== sum) problems.push(`${name} was modified`);
    }
    for (const f of files) if (!listed.has(f)) problems.push(`${f} is not listed in SHA256SUMS`);
    assert.deepEqual(problems, []);
  });
});
