/**
 * The bound on a replica's image (GANTRY_REPLICA_MAX_IMAGE_GIB), checked once it is on the host
 * (Podman 4.3 cannot tell an image's size before it has it). A larger one fails its launch, and is
 * removed again unless another container uses it; while it is pulled, it fills at most Gantry's
 * container storage, never the host's disk (container-storage.ts).
 */
import type { PodmanEngine } from './podman-engine';

const GIB = 1024 ** 3;

/** Why the image is too large for a replica, or undefined when it is not; takes a too large one out. */
export async function imageTooLarge(
  engine: PodmanEngine,
  image: string,
  maxGiB: number,
  /** The image as its deployment names it, for the message (`image` may be the id a pull answered). */
  named = image,
): Promise<string | undefined> {
  // Its layers unpacked, from its history: the image's own Size counts again the copies of its
  // layers made for containers' user namespaces (snapshots here, that share its data).
  const history = JSON.parse(await engine.podman(['history', '--format', 'json', image])) as Array<{ size?: number }>;
  const bytes = history.reduce((sum, layer) => sum + (layer.size ?? 0), 0);
  if (!(bytes > maxGiB * GIB)) return undefined;
  await engine.podman(['rmi', image]).catch(() => undefined); // in use by another container: it stays
  return `The image ${named} takes ${(bytes / GIB).toFixed(2)} GiB unpacked; a replica's image may take at most ${+maxGiB.toFixed(2)} GiB here.`;
}
