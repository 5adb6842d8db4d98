/** Activities that run on gpu.<type> queues, on the accelerator host itself. */
import { activityInfo } from '@temporalio/activity';
import type { GpuType } from '../shared/gpu-types';
import type { HostReport } from '../shared/self-check';
import type { AcceleratorHost } from '../providers/accelerator/host';

export function createAcceleratorActivities({ host }: { host: AcceleratorHost }) {
  return {
    async describeAcceleratorHost({ gpuType }: { gpuType: GpuType }): Promise<HostReport> {
      return host.describe(gpuType, activityInfo().taskQueue);
    },
  };
}

export type AcceleratorActivities = ReturnType<typeof createAcceleratorActivities>;
