/**
 * A value loaded at most once per `ttlMs` per key (the gateway's view of
 * endpoints, deployments and their running replicas): requests within the
 * window cost no database round trip, and changes show within it.
 */
export function ttlCache<V>(ttlMs: number, maxEntries = 10_000) {
  const entries = new Map<string, { value: V; at: number }>();
  const get = async (key: string, load: () => Promise<V>): Promise<V> => {
    const hit = entries.get(key);
    if (hit && Date.now() - hit.at < ttlMs) return hit.value;
    const value = await load();
    entries.delete(key);
    entries.set(key, { value, at: Date.now() });
    if (entries.size > maxEntries) entries.delete(entries.keys().next().value!);
    return value;
  };
  /** Forgets a key (what was read turned out wrong), so the next get loads it again. */
  const invalidate = (key: string) => void entries.delete(key);
  return Object.assign(get, { invalidate });
}
