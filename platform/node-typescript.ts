/**
 * How Gantry starts a node process of its own TypeScript (the platform's processes, test files,
 * scripts and benches): with tsx's CommonJS hook alone. The project is CommonJS, and packages that
 * ship only ES modules are loaded with `await import()`, which node serves itself.
 *
 * `--import tsx` would also register tsx's ES module hooks, which start a loader thread in every
 * process: an empty script took 0.37 s of CPU that way against 0.09 s with the CommonJS hook alone.
 * What that buys a short process: the pure test tier's 33 files took 23.5 s of CPU instead of
 * 32.5 s (back to back), the test runner's own test 3.6 s instead of 7.4 s. A long one (a workflow
 * test file, a worker) gains nothing measurable.
 */
export const NODE_TYPESCRIPT_ARGS = ['--require', 'tsx/cjs'] as const;
