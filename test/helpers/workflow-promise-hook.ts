/**
 * The workflow SDK's promise hook, left out of test processes.
 *
 * The SDK installs a V8 promise hook so that a workflow can answer the `__stack_trace` query: for
 * every promise it creates, the hook builds an Error, formats its stack and keeps it. The tests run
 * workflows in their own thread (debugMode, as the SDK's replay workers do), so the hook also runs
 * for every promise of the test itself, its gRPC clients and its activity doubles. Measured on the
 * four-day flapping-node test: 31.3 s of CPU with the hook, 23.8 s without (sdk-typescript#1587 is
 * the upstream report of the hook's cost).
 *
 * No test asks a run for its stack trace, and the hook changes nothing a workflow does, so test
 * processes go without it. Error stacks from workflow code are still mapped to their sources: the
 * SDK's other global handler (its Error.prepareStackTrace) is installed as before. Production
 * workers are untouched.
 */
import { globalHandlers } from '@temporalio/worker/lib/workflow/vm-shared';

/** Call before the first worker (or replay) of the process; the SDK installs its handlers once. */
export function withoutWorkflowPromiseHook(): void {
  const handlers = globalHandlers as unknown as { setPromiseHook?: unknown };
  // The hook is installed by this method of the SDK's private handler object. An SDK that renames
  // it would make this a silent no-op (and the tests slow again), so that fails loudly instead.
  if (typeof handlers.setPromiseHook !== 'function') {
    throw new Error(
      '@temporalio/worker no longer installs its promise hook through globalHandlers.setPromiseHook: ' +
        'update test/helpers/workflow-promise-hook.ts for this SDK version',
    );
  }
  handlers.setPromiseHook = () => undefined;
}
