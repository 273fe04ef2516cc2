/**
 * In-process state kept per store: each store (each database) has its own map, made on first use and dropped
 * with the store, so that two stores in one process never share keys.
 */
export function mapPerStore<TValue>(): (store: object) => Map<string, TValue> {
  const maps = new WeakMap<object, Map<string, TValue>>();
  return (store) => {
    let map = maps.get(store);
    if (!map) {
      map = new Map();
      maps.set(store, map);
    }
    return map;
  };
}
