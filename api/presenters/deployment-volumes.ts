/**
 * How a deployment volume is shown (the SDK's beta.jig.volumes): the version asked for (or the
 * current one) with its files, every version, and which deployments mount each.
 */
import type { VolumeRow, VolumeVersionRow } from '../../db/deployment-volumes';

export function toDeploymentVolume(
  v: VolumeRow,
  shown: VolumeVersionRow,
  versions: VolumeVersionRow[],
  mounts: Array<{ version: number; deployment_id: string }>,
) {
  const mountedBy = (n: number) => mounts.filter((m) => m.version === n).map((m) => m.deployment_id);
  return {
    id: v.id,
    object: 'volume' as const,
    name: v.name,
    type: v.type,
    content: {
      type: 'files' as const,
      source_prefix: shown.source_prefix,
      files: shown.files.map((f) => ({ name: f.name, size: Number(f.size), last_modified: f.last_modified })),
    },
    current_version: v.current_version,
    mounted_by: mountedBy(shown.version),
    version_history: Object.fromEntries(
      versions.map((x) => [
        String(x.version),
        {
          version: x.version,
          content: { type: 'files' as const, source_prefix: x.source_prefix },
          mounted_by: mountedBy(x.version),
        },
      ]),
    ),
    created_at: new Date(v.created_at).toISOString(),
    updated_at: new Date(v.updated_at).toISOString(),
  };
}
