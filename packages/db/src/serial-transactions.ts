/**
 * Prisma 7's query interpreter sends the independent reads of one operation (an `include`'s relations) at the
 * same time; inside an interactive transaction they all go to the transaction's one pg client, which queues
 * them — the queue node-postgres deprecates ("Calling client.query() when the client is already executing a
 * query", removed in pg@9). This wrapper sends a transaction's statements one after another instead, so nothing
 * here relies on that queue. Outside a transaction each statement has a pooled connection of its own.
 */
import type { PrismaPg } from '@prisma/adapter-pg';

type Adapter = Awaited<ReturnType<PrismaPg['connect']>>;
type Transaction = Awaited<ReturnType<Adapter['startTransaction']>>;

const SENDS_STATEMENT = new Set<PropertyKey>(['queryRaw', 'executeRaw', 'commit', 'rollback']);

function inOrder(transaction: Transaction): Transaction {
  let last: Promise<unknown> = Promise.resolve();
  return new Proxy(transaction, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== 'function') return value;
      if (!SENDS_STATEMENT.has(property)) return (...args: unknown[]) => Reflect.apply(value, target, args);
      return (...args: unknown[]) => {
        const send = () => Reflect.apply(value, target, args) as Promise<unknown>;
        const sent = last.then(send, send);
        last = sent.catch(() => {});
        return sent;
      };
    },
  });
}

/** `factory`, whose interactive transactions send their statements one at a time. */
export function serialTransactions(factory: PrismaPg): PrismaPg {
  return new Proxy(factory, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      // The factory's other methods run on the factory itself: its settings may be private fields (#…).
      if (typeof value === 'function' && property !== 'connect') return value.bind(target);
      if (property !== 'connect' || typeof value !== 'function') return value;
      return async () => {
        const adapter = (await Reflect.apply(value, target, [])) as Adapter;
        const wrapped: Adapter = new Proxy(adapter, {
          get(inner, name) {
            const member: unknown = Reflect.get(inner, name);
            if (typeof member !== 'function') return member;
            if (name !== 'startTransaction')
              return (...args: unknown[]) => Reflect.apply(member, inner, args);
            // Called on this proxy, it runs on the adapter itself; called with another `this` (the idempotency
            // fast path's, which answers `client` itself), on that.
            return async function startTransaction(this: unknown, ...args: unknown[]) {
              const self = this === wrapped || this === undefined ? inner : this;
              return inOrder((await Reflect.apply(member, self, args)) as Transaction);
            };
          },
        });
        return wrapped;
      };
    },
  });
}
