/**
 * The key browser's search: one box that understands what was pasted into it — a key (or the start of one), an
 * order id, a principal (`user:…`, `guest:…`, a user id or an email), or the `key_hash` of a log line. An
 * empty search lists the newest keys.
 */
import type { Database } from '@idem/db';
import type { FindKeysOptions, KeyFilter } from '@idem/idempotency/prisma';
import { orderIdForIntent } from '../services/place-order.ts';
import { type KeyView, keyOperations, toKeyView } from './key-rows.ts';

export type KeyMatch = 'recent' | 'key' | 'key_prefix' | 'order' | 'principal' | 'key_hash';

export interface KeySearchResult {
  query: string;
  keys: Array<KeyView & { matchedBy: KeyMatch }>;
}

/** The procedure whose keys name an order (see services/place-order.ts, orderIdForIntent). */
export const ORDER_PROCEDURE = 'checkout.placeOrder';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const KEY_HASH = /^[0-9a-f]{16}$/i;

export async function searchKeys(db: Database, rawQuery: string, limit = 50): Promise<KeySearchResult> {
  const query = rawQuery.trim();
  const find = (filter?: KeyFilter, options: FindKeysOptions = {}) =>
    findViews(db, filter, { limit, ...options });
  if (query === '') {
    const keys = await find(undefined, { order: 'latest-expiry' });
    return { query, keys: keys.map((key) => ({ ...key, matchedBy: 'recent' as const })) };
  }

  const searches: Array<Promise<Array<KeyView & { matchedBy: KeyMatch }>>> = [
    tagged('key', find({ key: query })),
    tagged('key_prefix', find({ keyPrefix: query })),
  ];
  if (/^(user|guest):/.test(query)) {
    searches.push(tagged('principal', find({ scope: query })));
  }
  if (query.includes('@')) {
    const user = await db.user.findFirst({
      where: { email: { equals: query, mode: 'insensitive' } },
      select: { id: true },
    });
    if (user) searches.push(tagged('principal', find({ scope: `user:${user.id}` })));
  }
  if (UUID.test(query)) {
    const id = query.toLowerCase();
    searches.push(
      tagged('principal', find({ scope: [`user:${id}`, `guest:${id}`] })),
      tagged('order', keysForOrder(db, id)),
    );
  }
  if (KEY_HASH.test(query)) {
    searches.push(tagged('key_hash', find({ keyHash: query })));
  }

  // Most specific first: an exact key beats a prefix, and each key is listed once.
  const seen = new Set<string>();
  const keys: KeySearchResult['keys'] = [];
  for (const found of await Promise.all(searches)) {
    for (const key of found) {
      if (seen.has(key.ref)) continue;
      seen.add(key.ref);
      keys.push(key);
    }
  }
  return { query, keys: keys.slice(0, limit) };
}

/**
 * The key behind an order. The order id is derived from (scope, key, fingerprint) by a hash, so it is found by
 * re-deriving it for the keys of the order's principal (bounded: keys live for the retention window).
 */
export async function keysForOrder(db: Database, orderId: string): Promise<KeyView[]> {
  const order = await db.order.findUnique({ where: { id: orderId }, select: { principal: true } });
  if (!order) return [];
  const candidates = await findViews(
    db,
    { scope: order.principal, procedure: ORDER_PROCEDURE },
    { limit: 500 },
  );
  return candidates.filter((key) => orderIdForIntent(key) === orderId);
}

async function tagged<T>(
  matchedBy: KeyMatch,
  rows: Promise<T[]>,
): Promise<Array<T & { matchedBy: KeyMatch }>> {
  return (await rows).map((row) => ({ ...row, matchedBy }));
}

async function findViews(db: Database, filter: KeyFilter | undefined, options: FindKeysOptions) {
  return (await keyOperations(db).findKeys(filter, options)).map(toKeyView);
}
