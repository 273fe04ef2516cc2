/**
 * A read shared by everyone who asks within `maxAgeMs`: scrapes, open dashboards and a scrape storm cost one read
 * per interval and per source (a database, a provider reader). Concurrent callers share the read in flight; a
 * failed read is not kept, so the next caller tries again.
 */
export function sharedRead<TSource extends object, TValue>(
  read: (source: TSource) => Promise<TValue>,
): (source: TSource, maxAgeMs: number) => Promise<TValue> {
  const reads = new WeakMap<TSource, { at: number; value: Promise<TValue> }>();
  return (source, maxAgeMs) => {
    const cached = reads.get(source);
    if (cached && Date.now() - cached.at < maxAgeMs) return cached.value;
    const value = read(source);
    reads.set(source, { at: Date.now(), value });
    value.catch(() => {
      if (reads.get(source)?.value === value) reads.delete(source);
    });
    return value;
  };
}
