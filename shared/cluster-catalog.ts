/**
 * Regions of the local fleet simulator: which GPU types each offers and which
 * driver + CUDA images it has (`nvidia_version_id`s). Every region name starts
 * with `sim-` so nobody mistakes the local fleet for a real data centre.
 */
import type { GpuType } from './gpu-types';

export interface DriverVersion {
  id: string;
  cuda_version: string;
  nvidia_driver_version: string;
  os: string;
}

export interface Region {
  name: string;
  supported_instance_types: GpuType[];
  driver_versions: DriverVersion[];
  /** A region that exists but takes no new clusters (listed, so a client can tell why). */
  usable: boolean;
  description: string;
}

function drivers(region: string, pairs: Array<[cuda: string, driver: string]>): DriverVersion[] {
  return pairs.flatMap(([cuda, driver]) =>
    ['ubuntu-22.04', 'ubuntu-24.04'].map((os) => ({
      id: `${region}-cuda${cuda}-drv${driver}-${os}`,
      cuda_version: cuda,
      nvidia_driver_version: driver,
      os,
    })),
  );
}

export const REGIONS: readonly Region[] = [
  {
    name: 'sim-us-east-1',
    supported_instance_types: ['H100_SXM', 'H200_SXM', 'B200_SXM', 'H100_SXM_INF'],
    driver_versions: drivers('sim-us-east-1', [
      ['12.4', '550'],
      ['12.6', '560'],
      ['12.8', '570'],
    ]),
    usable: true,
    description: 'Local fleet simulator (no hardware)',
  },
  {
    name: 'sim-eu-north-1',
    supported_instance_types: ['H100_SXM', 'B300_SXM', 'L40_PCIE', 'RTX_6000_PCI'],
    driver_versions: drivers('sim-eu-north-1', [
      ['12.6', '560'],
      ['12.8', '570'],
    ]),
    usable: true,
    description: 'Local fleet simulator (no hardware)',
  },
  {
    name: 'sim-ap-closed-1',
    supported_instance_types: ['H100_SXM'],
    driver_versions: drivers('sim-ap-closed-1', [['12.4', '550']]),
    usable: false,
    description: 'Local fleet simulator region closed to new clusters',
  },
];

export const findRegion = (name: string) => REGIONS.find((r) => r.name === name);

/** The image OS implied by a legacy `cuda_version`: a bare semantic value means ubuntu-22.04. */
export function splitCudaVersion(value: string): { cuda: string; os: string } {
  const m = /^(\d+\.\d+(?:\.\d+)?)(?:-(.+))?$/.exec(value.trim());
  if (!m) return { cuda: value, os: '' };
  return { cuda: m[1], os: m[2] ?? 'ubuntu-22.04' };
}

export function findDriverByPair(
  region: Region,
  cudaVersion: string,
  driverVersion: string,
): DriverVersion | undefined {
  const { cuda, os } = splitCudaVersion(cudaVersion);
  return region.driver_versions.find(
    (d) => d.cuda_version === cuda && d.os === os && d.nvidia_driver_version === driverVersion.trim(),
  );
}
