/**
 * The documentation names only what exists: in README.md and every page under docs/, each relative
 * link leads to a file or folder of the tree, each backticked repository path (`test/…/x.test.ts`,
 * `api/…`, `scripts/…`: a path whose first folder is one of the repository's own) exists, and each
 * command it shows still runs what it names: `./dev` with a subcommand `dev` accepts (the test
 * files and folders `./dev test` is given, the benches `./dev bench` knows), `npx tsx` and
 * `node --require tsx/cjs` with a file that exists, `npm run` with a script of package.json. A page that
 * names a deleted file or a renamed command fails here, not in a reader's terminal. Pure: reads
 * files only.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

const ROOT = path.resolve(__dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

/** README.md and every Markdown page under docs/, as paths relative to the root. */
function pages(): string[] {
  const found = ['README.md'];
  const walk = (dir: string) => {
    for (const entry of readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const rel = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith('.md')) found.push(rel);
    }
  };
  walk('docs');
  return found;
}

/** The repository's own top-level folders: a backticked path starting with one is a path of the tree. */
const TOP_FOLDERS = new Set(
  readdirSync(ROOT, { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith('.') && e.name !== 'node_modules')
    .map((e) => e.name),
);

/** `./dev`'s subcommands: the arms of its `case "${1:-}"`. */
const DEV_SUBCOMMANDS = new Set(
  [...(/case "\$\{1:-\}" in([\s\S]*?)\nesac/.exec(read('dev'))?.[1] ?? '').matchAll(/^ {2}([a-z-]+)\)$/gm)].map(
    (m) => m[1],
  ),
);
/** The benches `./dev bench` (bench/all.ts) accepts by name. */
const BENCHES = new Set(
  [...(/const BENCHES = \[([^\]]*)\]/.exec(read('bench/all.ts'))?.[1] ?? '').matchAll(/'([^']+)'/g)].map((m) => m[1]),
);
const NPM_SCRIPTS = new Set(Object.keys((JSON.parse(read('package.json')) as { scripts: object }).scripts));

/** A page split into its code (fenced blocks and inline code spans) and its prose without them. */
function split(text: string): { code: string[]; prose: string } {
  const code: string[] = [];
  const prose: string[] = [];
  let fence: string[] | null = null;
  for (const line of text.split('\n')) {
    if (/^\s*```/.test(line)) {
      if (fence) code.push(fence.join('\n'));
      fence = fence ? null : [];
    } else if (fence) fence.push(line);
    else prose.push(line);
  }
  const withoutSpans = prose.join('\n').replace(/`([^`]+)`/g, (_, span: string) => {
    code.push(span);
    return ' ';
  });
  return { code, prose: withoutSpans };
}

/** Whether `rel` (relative to the root; a `*` in its last segment matches any run of characters) exists. */
function exists(rel: string): boolean {
  if (!rel.includes('*')) return existsSync(path.join(ROOT, rel));
  const dir = path.dirname(rel);
  const pattern = new RegExp(`^${path.basename(rel).split('*').map(escape).join('.*')}$`);
  return existsSync(path.join(ROOT, dir)) && readdirSync(path.join(ROOT, dir)).some((name) => pattern.test(name));
}
const escape = (s: string) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&');

/** The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens. */
function anchors(text: string): Set<string> {
  const { prose } = split(text.replace(/`/g, ''));
  return new Set(
    [...prose.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) =>
      m[1]
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, '')
        .replace(/\s/g, '-'),
    ),
  );
}

/** What is dead on one page: each entry names the reference and why. */
export function deadReferences(page: string, text: string): string[] {
  const dead: string[] = [];
  const { code, prose } = split(text);

  for (const [, target] of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) continue; // a URL, or an anchor on this page
    const [file, anchor] = decodeURI(target).split('#');
    const full = path.resolve(ROOT, path.dirname(page), file);
    if (!existsSync(full)) dead.push(`link ${target}: no such file`);
    else if (anchor && file.endsWith('.md') && !anchors(readFileSync(full, 'utf8')).has(anchor)) {
      dead.push(`link ${target}: ${file} has no heading #${anchor}`);
    }
  }

  for (const snippet of code) {
    for (const raw of snippet.split(/\s+/)) {
      const token = raw.replace(/^[(\["']+/, '').replace(/[)\]"',.;:]+$/, '');
      const m = /^(?:\.\/)?([\w.-]+)\/[\w./*-]*$/.exec(token);
      if (!m || !TOP_FOLDERS.has(m[1])) continue;
      if (!exists(token.replace(/^\.\//, ''))) dead.push(`path ${token}: no such file or folder`);
    }
    for (const line of snippet.split('\n')) {
      // A command runs to the end of the line, a comment or the next command.
      const commands = line.split(/\s(?:#|&&|\|\||;|\|)\s|\s#/);
      for (const command of commands) {
        for (const [, sub, rest] of command.matchAll(/(?:^|\s)\.\/dev(?:\s+(\S+))?((?:\s+\S+)*)/g)) {
          if (!sub) continue; // the script itself, named as a file
          if (!DEV_SUBCOMMANDS.has(sub)) {
            dead.push(`./dev ${sub}: dev has no such subcommand (it has ${[...DEV_SUBCOMMANDS].join(', ')})`);
            continue;
          }
          const args = rest.trim().split(/\s+/).filter(Boolean);
          if (sub === 'test') {
            for (const arg of args)
              if (!arg.startsWith('-') && !exists(arg)) dead.push(`./dev test ${arg}: no such test file or folder`);
          } else if (sub === 'bench') {
            for (const arg of args)
              if (!BENCHES.has(arg)) dead.push(`./dev bench ${arg}: no such bench (bench/all.ts)`);
          } else if (args.length) dead.push(`./dev ${sub} ${args.join(' ')}: ./dev ${sub} takes no arguments`);
        }
        for (const [, file] of command.matchAll(/(?:npx tsx|node --require tsx\/cjs)\s+(\S+)/g)) {
          if (!exists(file)) dead.push(`${file}: the script it runs does not exist`);
        }
        for (const [, script] of command.matchAll(/npm run\s+([\w:-]+)/g)) {
          if (!NPM_SCRIPTS.has(script)) dead.push(`npm run ${script}: package.json has no such script`);
        }
      }
    }
  }
  return [...new Set(dead)];
}

test('the checks can fail: each kind of dead reference is found', () => {
  const broken = [
    '[gone](docs/no-such-page.md), [moved](docs/architecture.md#no-such-heading) and `test/clusters/no-such.test.ts`,',
    'run `./dev tset`, `./dev test test/no-such-folder`, `./dev bench no-such-bench`,',
    '`npx tsx scripts/no-such.ts`, `npm run no-such-script`.',
    '```sh',
    'node --require tsx/cjs bench/no-such.ts   # a comment naming `./dev`',
    '```',
  ].join('\n');
  assert.deepEqual(
    deadReferences('README.md', broken).sort(),
    [
      'link docs/no-such-page.md: no such file',
      'link docs/architecture.md#no-such-heading: docs/architecture.md has no heading #no-such-heading',
      'path test/clusters/no-such.test.ts: no such file or folder',
      'path bench/no-such.ts: no such file or folder',
      'bench/no-such.ts: the script it runs does not exist',
      `./dev tset: dev has no such subcommand (it has ${[...DEV_SUBCOMMANDS].join(', ')})`,
      './dev test test/no-such-folder: no such test file or folder',
      'path test/no-such-folder: no such file or folder',
      './dev bench no-such-bench: no such bench (bench/all.ts)',
      'path scripts/no-such.ts: no such file or folder',
      'scripts/no-such.ts: the script it runs does not exist',
      'npm run no-such-script: package.json has no such script',
    ].sort(),
  );
  const sound =
    '[arch](docs/architecture.md), [start](README.md#quick-start), `test/run.ts`, `./dev test test/queue`, `./dev bench queue`, `npm run lint`.';
  assert.deepEqual(deadReferences('README.md', sound), []);
  assert.deepEqual([...DEV_SUBCOMMANDS].sort(), ['bench', 'test', 'up'], 'read from dev');
  assert.ok(BENCHES.has('queue') && NPM_SCRIPTS.has('test'), 'read from bench/all.ts and package.json');
});

for (const page of pages()) {
  test(`${page} names only files and commands that exist`, () => {
    assert.deepEqual(deadReferences(page, read(page)), []);
  });
}
