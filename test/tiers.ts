/**
 * The three test tiers, and which one a test file is in: known from what the file uses, never
 * declared, so it cannot drift from the code (a file that starts using the platform is a platform
 * file from then on, wherever it lives).
 *
 *   - pure: no services; runs in seconds.
 *   - workflow: Temporal's time-skipping test server (the JVM), one per file, with the workflow bundle.
 *   - platform: the Temporal dev server and PostgreSQL that test/run.ts starts, or the host's heavier
 *     parts (an embedded PostgreSQL the file starts itself, podman, the Python environments and
 *     their model weights).
 *
 * A file is in the heaviest tier whose marks it, a test helper it imports (test/, followed
 * transitively), or a fixture script it runs, names. test/run.ts hands each file only its tier's
 * services, in every run (CI's full run included), so a file whose marks were missed fails instead
 * of passing by luck.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

export const TIERS = ['pure', 'workflow', 'platform'] as const;
export type Tier = (typeof TIERS)[number];

const TEST_DIR = __dirname;

/** What a name in a file's text (comments aside) says it needs. */
const MARKS: Array<{ tier: Tier; needs: string; mark: RegExp }> = [
  {
    tier: 'workflow',
    needs: "Temporal's time-skipping test server",
    mark: /(?<!function )\bworkflowTestEnvForFile\(/,
  },
  {
    tier: 'workflow',
    // Bundled from source for each worker instead (test/replay: two minutes rather than seconds).
    needs: 'the workflow bundle',
    mark: /(?<!function )\bworkflowSource\(/,
  },
  {
    tier: 'platform',
    needs: 'the Temporal dev server and PostgreSQL',
    // startProcess: API and worker processes, which connect to both.
    mark: /(?<!function )\b(startTestPlatform|withScratchDatabase|startProcess)\(|\bprocess\.env\.(DATABASE_URL|TEMPORAL_ADDRESS|TEMPORAL_CLI)\b/,
  },
  {
    tier: 'platform',
    needs: 'an embedded PostgreSQL of its own',
    mark: /(?<!function )\bstartEmbeddedPostgres\(/,
  },
  {
    tier: 'platform',
    needs: 'podman',
    mark: /\b(startPodmanPlatform|PodmanEngine)\b|['/]podman-engine'/,
  },
  {
    tier: 'platform',
    needs: 'the Python environments ./dev installs',
    mark: /\.(trainerPython|speechPython|torchTrainerPython)\b|\bprocess\.env\.GANTRY_\w*(PYTHON|VENV|SCHEMATHESIS|MODEL_DIR)\b/,
  },
];

/** Comments say what code does; only code counts. */
const withoutComments = (text: string) => text.replace(/\/\*[\s\S]*?\*\/|(^|[^:'"`])\/\/.*$/gm, '$1');

/** A relative import of a test helper (test/, not a *.test.ts file): which module, and which names. */
interface HelperImport {
  module: string;
  /** [the name the helper declares, the name the importer uses]; undefined: the whole module. */
  names?: Array<[string, string]>;
}

function helperImports(file: string, text: string): HelperImport[] {
  const found: HelperImport[] = [];
  for (const [, clause, spec] of text.matchAll(/\bimport\s+(?:type\s+)?([\s\S]*?)\s*from\s+'(\.[^']*)'/g)) {
    const base = path.resolve(path.dirname(file), spec);
    const module = [`${base}.ts`, path.join(base, 'index.ts')].find((f) => existsSync(f) && statSync(f).isFile());
    if (!module?.startsWith(TEST_DIR + path.sep) || module.endsWith('.test.ts')) continue;
    const braces = /^\{([\s\S]*)\}$/.exec(clause.trim());
    const names = braces?.[1]
      .split(',')
      .map((n) => n.trim().replace(/^type\s+/, ''))
      .filter(Boolean)
      .map((n) => n.split(/\s+as\s+/) as [string, string?])
      .map(([declared, local]): [string, string] => [declared, local ?? declared]);
    found.push({ module, names });
  }
  return found;
}

/**
 * The scripts a file runs from a `fixtures` folder beside it (in a child process, so not imported):
 * what they start, the file needs.
 */
function fixtureScripts(file: string, text: string): string[] {
  const named = [
    ...text.matchAll(/\bpath\.join\(__dirname,\s*'fixtures',\s*'([^']+)'\)/g),
    ...text.matchAll(/\brequire\.resolve\('\.\/fixtures\/([^']+)'\)/g),
  ].map((m) => path.join(path.dirname(file), 'fixtures', m[1]));
  return named
    .map((f) => [f, `${f}.ts`].find((c) => existsSync(c) && statSync(c).isFile()))
    .filter((f): f is string => f !== undefined);
}

/** A module's top-level declarations by name: each from its line to the next declaration's. */
function declarations(text: string): Map<string, string> {
  const starts = [
    ...text.matchAll(
      /^(?:export\s+)?(?:default\s+)?(?:async\s+)?(?:function\*?|const|let|class|interface|type|enum)\s+(\w+)/gm,
    ),
  ];
  return new Map(starts.map((m, i) => [m[1], text.slice(m.index, starts[i + 1]?.index ?? text.length)]));
}

/**
 * The code of `names` in `text` (undefined: all of it), with the module's own declarations that
 * code refers to, followed until nothing new is named.
 */
function codeOf(text: string, names: string[] | undefined): string {
  if (!names) return text;
  const decls = declarations(text);
  const taken = new Set<string>();
  let code = '';
  for (let pending = names; pending.length;) {
    for (const name of pending) {
      taken.add(name);
      // A name it does not declare at top level (a re-export, say): the whole module, to be safe.
      code += decls.get(name) ?? text;
    }
    pending = [...decls.keys()].filter((n) => !taken.has(n) && new RegExp(`\\b${n}\\b`).test(code));
  }
  return code;
}

export interface TierOf {
  tier: Tier;
  /** What put it there (empty for pure): each need, with the file that names it. */
  because: string[];
}

/**
 * The tier of `file` (an absolute path to a test file): the heaviest that its code, or the code
 * of the test helpers' declarations it imports (followed through the helpers' own imports), marks.
 */
export function tierOf(file: string): TierOf {
  const because = new Set<string>();
  let tier: Tier = 'pure';
  const seen = new Set<string>();
  const visit = (f: string, names: string[] | undefined) => {
    const key = `${f}:${names?.join(',') ?? '*'}`;
    // This module's marks are patterns that name what they look for, not uses of it.
    if (seen.has(key) || f === __filename) return;
    seen.add(key);
    const text = withoutComments(readFileSync(f, 'utf8'));
    const code = codeOf(text, names);
    for (const { tier: t, needs, mark } of MARKS) {
      if (!mark.test(code)) continue;
      because.add(`${needs} (${path.relative(path.dirname(TEST_DIR), f)})`);
      if (TIERS.indexOf(t) > TIERS.indexOf(tier)) tier = t;
    }
    for (const script of fixtureScripts(f, code)) visit(script, undefined);
    for (const { module, names: imported } of helperImports(f, text)) {
      const used = imported?.filter(([, local]) =>
        new RegExp(`\\b${local}\\b`).test(code.replace(/^import[\s\S]*?;$/gm, '')),
      );
      if (!imported) visit(module, undefined);
      else if (used?.length)
        visit(
          module,
          used.map(([declared]) => declared),
        );
    }
  };
  visit(file, undefined);
  return { tier, because: [...because] };
}
