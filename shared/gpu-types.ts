/** Accelerator types of the spec (GPU cluster `gpu_type`). One place for the list. */
export const GPU_TYPES = [
  'H100_SXM',
  'H200_SXM',
  'RTX_6000_PCI',
  'L40_PCIE',
  'B200_SXM',
  'H100_SXM_INF',
  'B300_SXM',
] as const;

export type GpuType = (typeof GPU_TYPES)[number];
