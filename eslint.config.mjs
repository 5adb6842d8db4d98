/**
 * Lint: promises that nobody awaits or that are passed where a callback's result is ignored, type
 * imports written as such, and the architecture as import zones (docs/architecture.md):
 *
 * - workflow code (workflows/, shared/) is deterministic and runs in Temporal's sandbox: no Node
 *   built-ins, no database, providers, API, gateway or platform modules, no Temporal client or
 *   worker; activities only as types (their signatures, for proxyActivities);
 * - activities do not reach into the API or the gateway;
 * - a route file imports no other route file (what routes share lives in api/use-cases/), and
 *   declares no schema (api/schemas/<area>.ts holds them, so the OpenAPI document has one source),
 *   and runs no SQL or transaction (a read is a db/ function, a multi-step write a use case);
 * - a presenter (api/presenters/<area>.ts, how an area's objects are shown) only shapes what it is
 *   given: it calls no use case, workflow, route or database client;
 * - production code reads no environment variable outside platform/config.ts (its settings, and
 *   inheritedEnvironment() for what child processes get), and imports nothing from scripts/
 *   (scripts may import production code, not the reverse). test/, bench/ and scripts/ are tooling
 *   and may read the environment; so may the code that runs outside the platform: cli/ (the
 *   `gantry` client on a user's machine: GANTRY_BASE_URL and SERVICE_API_KEY are not the platform's
 *   settings), worker-kit/ (the library tenants' containers use) and examples/ (tenants' code).
 *
 * Run by `./dev test` after prettier; `npx eslint .` runs it alone.
 */
import { builtinModules } from 'node:module';
import tseslint from 'typescript-eslint';

const nodeBuiltins = [...builtinModules.filter((m) => !m.startsWith('_')), 'node:*'];

/** Gantry's own code, as opposed to its tests, benches, scripts and examples. */
const production = [
  'activities',
  'api',
  'cli',
  'datasets',
  'db',
  'fine-tunes',
  'gateway',
  'platform',
  'providers',
  'shared',
  'worker-kit',
  'workers',
  'workflows',
].map((dir) => `${dir}/**/*.ts`);

const restrict = (patterns) => ({
  '@typescript-eslint/no-restricted-imports': ['error', { patterns }],
});

export default tseslint.config(
  {
    ignores: ['node_modules/**', 'dist/**', '.data/**', '.venv*/**', 'test/replay/histories/**', '**/*.js', '**/*.mjs'],
  },
  {
    files: ['**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        // node:test's describe/test return promises the runner itself awaits.
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['describe', 'test', 'it', 'suite'] },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': [
        'error',
        // `typeof import('x')` types what a require() returns (the SDK tests load it that way).
        { fixStyle: 'inline-type-imports', disallowTypeAnnotations: false },
      ],
    },
  },
  {
    files: production,
    rules: {
      // The core rule, so it adds to the zones' @typescript-eslint/no-restricted-imports below rather than replacing them.
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '(^|/)scripts(/|$)',
              message: 'Production code imports nothing from scripts/: move it to platform/ or shared/.',
            },
          ],
          paths: ['process', 'node:process'].map((name) => ({
            name,
            importNames: ['env'],
            message: 'Settings are read in platform/config.ts only.',
          })),
        },
      ],
    },
  },
  {
    files: production,
    ignores: ['platform/config.ts', 'cli/**', 'worker-kit/**'],
    rules: {
      'no-restricted-properties': [
        'error',
        {
          object: 'process',
          property: 'env',
          message:
            'Settings are read in platform/config.ts only (declare one there); a child process gets inheritedEnvironment() (providers/process/subprocess-env.ts).',
        },
      ],
    },
  },
  {
    files: ['workflows/**/*.ts', 'shared/**/*.ts'],
    rules: restrict([
      { group: nodeBuiltins, message: 'Workflow code runs in a deterministic sandbox: no Node built-ins.' },
      {
        group: ['pg', '@temporalio/client', '@temporalio/worker', '@temporalio/activity'],
        message: 'Not in workflow code.',
      },
      {
        regex: '(^|/)(db|providers|api|gateway|platform)(/|$)',
        message: 'Workflow code does no I/O: call an activity instead.',
        allowTypeImports: true,
      },
      {
        regex: '(^|/)activities(/|$)',
        message: 'Workflow code names activities by type only.',
        allowTypeImports: true,
      },
    ]),
  },
  {
    files: ['activities/**/*.ts'],
    rules: restrict([
      { regex: '(^|/)(api|gateway)(/|$)', message: 'Activities do not depend on the API or the gateway.' },
    ]),
  },
  {
    files: ['api/routes/**/*.ts'],
    rules: restrict([
      { group: ['./*'], message: 'Routes import no other route: put what they share in api/use-cases/.' },
      {
        group: ['zod'],
        message: 'Routes declare no schemas: name them in api/schemas/<area>.ts, built from api/schemas/common.ts.',
        allowTypeImports: true,
      },
    ]),
  },
  {
    files: ['api/routes/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "CallExpression[callee.property.name='query'], CallExpression[callee.name='withTransaction']",
          message: 'Routes run no SQL and no transaction: a read is a db/ function, a multi-step write a use case.',
        },
      ],
    },
  },
  {
    files: ['api/presenters/**/*.ts'],
    rules: restrict([
      {
        group: ['../routes/*', '../use-cases/*', '../workflows', '@temporalio/*', 'pg'],
        message: 'Presenters only shape what they are given: the route reads it and passes it in.',
        allowTypeImports: true,
      },
    ]),
  },
);
