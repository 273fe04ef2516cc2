/**
 * A driver adapter factory that keeps every adapter transaction Prisma opens on it — the object Prisma sends a
 * transaction's statements on — so a test can send statements on it as Prisma would, e.g. after Prisma closed
 * it. Wrapped around the fast path, it keeps the fast path's transactions; under it, the adapter's own.
 */
interface AdapterFactory {
  connect(): Promise<{ startTransaction(...args: never[]): Promise<unknown> }>;
}

export function keepingTransactions<TFactory extends AdapterFactory, TTransaction>(
  factory: TFactory,
  kept: TTransaction[],
): TFactory {
  return new Proxy(factory, {
    get(target, property) {
      const value = Reflect.get(target, property);
      if (property !== 'connect') return value;
      return async () => {
        const connected = await target.connect();
        return new Proxy(connected, {
          // Read on the adapter itself: a getter that reads a private field (#…) fails on a proxy.
          get(inner, name) {
            const member = Reflect.get(inner, name);
            if (name !== 'startTransaction')
              return typeof member === 'function' ? member.bind(inner) : member;
            return async (...args: Parameters<typeof connected.startTransaction>) => {
              const transaction = await connected.startTransaction(...args);
              kept.push(transaction as TTransaction);
              return transaction;
            };
          },
        });
      };
    },
  });
}
