/**
 * storageVolume (`volume/<id>`): carves out a shared volume created through
 * the storage API, then marks it available. Binding to a cluster and release
 * are the cluster workflow's business (its volume phase and its deletion).
 */
import { patched, setCurrentDetails, upsertSearchAttributes } from '@temporalio/workflow';
import { statusSearchAttributes } from '../shared/search-attributes';
import { clusterWaits } from './cluster-activities';
import { PATCHES } from './patches';

const storage = clusterWaits;

export async function storageVolume({ volumeId }: { volumeId: string }): Promise<'available' | 'gone'> {
  setCurrentDetails(`Provisioning volume ${volumeId}.`);
  const result = await storage.provisionStandaloneVolume.executeWithOptions({ summary: `provision ${volumeId}` }, [
    { volumeId },
  ]);
  setCurrentDetails(
    result === 'available' ? `Volume ${volumeId} is available.` : `Volume ${volumeId} was deleted first.`,
  );
  // (Before this patch the search attributes kept `provisioning`.)
  if (patched(PATCHES.volumeFinalStatus.id)) {
    upsertSearchAttributes(statusSearchAttributes(result === 'available' ? 'available' : 'deleted'));
  }
  return result;
}
