/**
 * The gateway's view of endpoints, deployments and their running replicas, kept off the request
 * path: a value younger than `ttlMs` is served as it is; an older one is still served (at most
 * `staleMs` old) while one refresh per key runs in the background, so under steady traffic no
 * request waits for the database. Only a key never loaded, or not asked for within `staleMs`,
 * is loaded on the request path, and concurrent requests for it share that one load.
 */
export function ttlCache<V>(ttlMs: number, opts: { staleMs?: number; maxEntries?: number } = {}) {
  const staleMs = opts.staleMs ?? ttlMs * 10;
  const maxEntries = opts.maxEntries ?? 10_000;
  const entries = new Map<string, { value: V; at: number }>();
  const loading = new Map<string, Promise<V>>();

  const load = (key: string, loader: () => Promise<V>): Promise<V> => {
    const inFlight = loading.get(key);
    if (inFlight) return inFlight;
    const p = loader()
      .then((value) => {
        entries.delete(key);
        entries.set(key, { value, at: Date.now() });
        if (entries.size > maxEntries) entries.delete(entries.keys().next().value!);
        return value;
      })
      .finally(() => loading.delete(key));
    loading.set(key, p);
    return p;
  };

  const get = async (key: string, loader: () => Promise<V>): Promise<V> => {
    const hit = entries.get(key);
    const age = hit ? Date.now() - hit.at : Infinity;
    if (hit && age < ttlMs) return hit.value;
    if (hit && age < staleMs) {
      // A failed refresh keeps the stale value; the next request past the TTL tries again.
      load(key, loader).catch(() => undefined);
      return hit.value;
    }
    return load(key, loader);
  };
  /** Forgets a key (what was read turned out wrong), so the next get loads it again. */
  const invalidate = (key: string) => void entries.delete(key);
  return Object.assign(get, { invalidate });
}
