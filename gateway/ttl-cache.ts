/**
 * The gateway's view of endpoints, deployments and their running replicas: a value is never
 * served older than `ttlMs`, and under steady traffic no request waits for the database. Past
 * half its TTL a value is still served while one refresh per key runs in the background, so a
 * key asked for often is renewed before it expires. Only a key never loaded, or not asked for
 * within its TTL, is loaded on the request path, and concurrent requests for it share that load.
 */
export function ttlCache<V>(ttlMs: number, maxEntries = 10_000) {
  const entries = new Map<string, { value: V; at: number }>();
  const loading = new Map<string, Promise<V>>();

  const load = (key: string, loader: () => Promise<V>): Promise<V> => {
    const inFlight = loading.get(key);
    if (inFlight) return inFlight;
    const p: Promise<V> = loader()
      .then((value) => {
        // A load started before an invalidate answers its own caller but is not kept.
        if (loading.get(key) === p) {
          entries.delete(key);
          entries.set(key, { value, at: Date.now() });
          if (entries.size > maxEntries) entries.delete(entries.keys().next().value!);
        }
        return value;
      })
      .finally(() => {
        if (loading.get(key) === p) loading.delete(key);
      });
    loading.set(key, p);
    return p;
  };

  const get = async (key: string, loader: () => Promise<V>): Promise<V> => {
    const hit = entries.get(key);
    const age = hit ? Date.now() - hit.at : Infinity;
    if (!hit || age >= ttlMs) return load(key, loader);
    // A failed refresh keeps the value until its TTL; the next request tries again.
    if (age >= ttlMs / 2) load(key, loader).catch(() => undefined);
    return hit.value;
  };
  /** Forgets a key (what was read turned out wrong): the next get loads it anew, joining no earlier load. */
  const invalidate = (key: string) => {
    entries.delete(key);
    loading.delete(key);
  };
  return Object.assign(get, { invalidate });
}
