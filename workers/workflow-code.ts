/**
 * Where workers get the workflow code: a bundle built once, or the sources. A module of its own,
 * without the activities workers/runtime.ts loads, so a test process or script that only runs
 * workflows loads the SDK and the config, not every activity and its clients.
 */
import { writeFileSync } from 'node:fs';
import { bundleWorkflowCode, type WorkerOptions } from '@temporalio/worker';
import { loadConfig } from '../platform/config';

/**
 * Workflow code: a prebuilt bundle when GANTRY_WORKFLOW_BUNDLE names one (the
 * test runner bundles once for all test files), else bundled from source.
 */
export function workflowSource(): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath'> {
  const bundle = loadConfig().workflowBundle;
  if (bundle) return { workflowBundle: { codePath: bundle } };
  return { workflowsPath: require.resolve('../workflows') };
}

/** Bundles the workflow code once into `file` (for GANTRY_WORKFLOW_BUNDLE), quietly. */
export async function writeWorkflowBundle(file: string, warn: (line: string) => void): Promise<void> {
  const quiet = () => undefined;
  const { code } = await bundleWorkflowCode({
    workflowsPath: require.resolve('../workflows'),
    logger: { trace: quiet, debug: quiet, info: quiet, log: quiet, warn, error: warn },
  });
  writeFileSync(file, code);
}
