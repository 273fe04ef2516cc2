/**
 * A driver adapter factory whose interactive transactions go through `wrap`: the one place the library (and an
 * app, for its own decorators) reaches under Prisma to the adapter's transaction object — the transaction fence,
 * a statement queue, a test's slow answer. Everything else is the factory's and the adapter's own.
 */
import type { DriverAdapterFactoryLike, DriverAdapterLike, TransactionLike } from './driver-adapter.ts';

export function wrapTransactions<TFactory extends DriverAdapterFactoryLike>(
  factory: TFactory,
  wrap: (transaction: TransactionLike) => TransactionLike,
  marks: Record<symbol, unknown> = {},
): TFactory {
  return new Proxy(factory, {
    get(target, property) {
      if (typeof property === 'symbol' && property in marks) return marks[property];
      const value: unknown = Reflect.get(target, property);
      // The factory's other methods run on the factory itself: its settings may be private fields (#…).
      if (typeof value === 'function' && property !== 'connect') return value.bind(target);
      if (property !== 'connect' || typeof value !== 'function') return value;
      return async () => {
        const adapter = (await Reflect.apply(value, target, [])) as DriverAdapterLike;
        const wrapped: DriverAdapterLike = new Proxy(adapter, {
          get(inner, name) {
            const member: unknown = Reflect.get(inner, name);
            if (typeof member !== 'function') return member;
            if (name !== 'startTransaction')
              return (...args: unknown[]) => Reflect.apply(member, inner, args);
            // Called on this proxy, it runs on the adapter itself (whose private fields a proxy lacks); called
            // with another `this` (the idempotency fast path's, which answers `client` itself), on that.
            return async function startTransaction(this: unknown, ...args: unknown[]) {
              const self = this === wrapped || this === undefined ? inner : this;
              return wrap((await Reflect.apply(member, self, args)) as TransactionLike);
            };
          },
        });
        return wrapped;
      };
    },
  });
}
