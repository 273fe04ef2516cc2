/**
 * The invariant checker, run on the database and the provider after each run. An intent is one logical
 * checkout (one email address, unique per intent); a naive client may send it under several keys.
 *
 *  1. at most one order per intent, and at most one succeeded provider charge per intent and per order
 *  2. every acknowledged success (200) has exactly one order (the one in its body, paid) and one charge
 *  3. every definite failure (a 4xx other than 409/429) has no order and no charge for its intent
 *  4. all 200 responses for one (principal, key) are byte-identical
 *  5. no idempotency_keys row of these keys is stuck in `processing` past its lease
 */
import type { Database } from '@idem/db';
import { type Attempt, isDefinite } from './load.ts';

export interface RunFigures {
  label: string;
  runs: number;
  intents: number;
  requests: number;
  /** Extra orders beyond one per intent. */
  duplicateOrders: number;
  /** Extra succeeded provider charges beyond one per intent (money taken twice). */
  duplicateCharges: number;
  /** 200s whose order is missing, not paid, or does not have exactly one succeeded charge. */
  lostAcks: number;
  /** Definite failures (4xx other than 409/429) whose intent nevertheless has an order or a charge. */
  failuresWithEffect: number;
  /** Keys whose 200 bodies differ. */
  nonIdenticalReplays: number;
  stuckKeys: number;
  responses5xx: number;
  conflicts409: number;
  /** 429s: the principal had too many keys in flight (retried). */
  tooMany429: number;
  noResponse: number;
  /** Intents whose client gave up without a definite answer. */
  unanswered: number;
  /** 200s that ran the procedure (no Idempotent-Replayed), summed over intents. */
  executions: number;
}

export interface InvariantReport {
  figures: RunFigures;
  violations: string[];
}

interface OrderRow {
  id: string;
  email: string;
  status: string;
  charges: number;
}

export async function checkInvariants(
  db: Database,
  attempts: Attempt[],
  { label, runs = 1 }: { label: string; runs?: number },
): Promise<InvariantReport> {
  const intents = [...new Set(attempts.map((attempt) => attempt.intent))];
  const orders = await db.$queryRawUnsafe<OrderRow[]>(
    `select o.id, o.email, o.status::text as status,
            (select count(*)::int from provider.charges c where c.order_ref = o.id::text and c.status = 'succeeded') as charges
     from orders o where o.email = any($1::text[])`,
    intents,
  );
  const ordersByIntent = groupBy(orders, (order) => order.email);
  const orderById = new Map(orders.map((order) => [order.id, order]));
  const violations: string[] = [];
  let duplicateOrders = 0;
  let duplicateCharges = 0;
  for (const intent of intents) {
    const own = ordersByIntent.get(intent) ?? [];
    const charges = own.reduce((sum, order) => sum + order.charges, 0);
    if (own.length > 1) duplicateOrders += own.length - 1;
    if (charges > 1) duplicateCharges += charges - 1;
    if (own.length > 1 || charges > 1)
      violations.push(`${intent}: ${own.length} orders, ${charges} succeeded charges`);
  }

  let lostAcks = 0;
  let failuresWithEffect = 0;
  let nonIdenticalReplays = 0;
  const ok = attempts.filter((attempt) => attempt.status === 200);
  for (const attempt of ok) {
    const id = orderIdOf(attempt.body);
    const order = id ? orderById.get(id) : undefined;
    const paidOnce = order?.status === 'paid' && order.charges === 1;
    if (!paidOnce) {
      lostAcks += 1;
      violations.push(
        `${attempt.intent}: a 200 (order ${id}) has ${order ? `status ${order.status}, ${order.charges} charges` : 'no order'}`,
      );
    }
  }
  for (const attempt of attempts) {
    if (attempt.status >= 400 && isDefinite(attempt.status)) {
      const own = ordersByIntent.get(attempt.intent) ?? [];
      if (own.some((order) => order.charges > 0 || order.status === 'paid')) {
        failuresWithEffect += 1;
        violations.push(`${attempt.intent}: a ${attempt.status} but the intent has a paid order or a charge`);
      }
    }
  }
  for (const [key, sent] of groupBy(ok, (attempt) => `${attempt.token}\0${attempt.key}`)) {
    if (new Set(sent.map((attempt) => attempt.body)).size > 1) {
      nonIdenticalReplays += 1;
      violations.push(`key ${key.split('\0')[1]}: ${sent.length} 200s with different bodies`);
    }
  }

  const keys = [...new Set(attempts.map((attempt) => attempt.key))];
  const stuck = await db.$queryRawUnsafe<Array<{ key: string }>>(
    `select key from idempotency_keys
     where key = any($1::text[]) and state = 'processing' and (locked_until is null or locked_until <= now())`,
    keys,
  );
  for (const row of stuck) violations.push(`key ${row.key} stuck in processing past its lease`);

  const answered = new Set(
    attempts.filter((attempt) => isDefinite(attempt.status)).map((attempt) => attempt.intent),
  );
  const unanswered = intents.filter((intent) => !answered.has(intent));
  const responses5xx = attempts.filter((attempt) => attempt.status >= 500).length;
  if (responses5xx > 0) violations.push(`${responses5xx} responses were 5xx`);

  return {
    violations,
    figures: {
      label,
      runs,
      intents: intents.length,
      requests: attempts.length,
      duplicateOrders,
      duplicateCharges,
      lostAcks,
      failuresWithEffect,
      nonIdenticalReplays,
      stuckKeys: stuck.length,
      responses5xx,
      conflicts409: attempts.filter((attempt) => attempt.status === 409).length,
      tooMany429: attempts.filter((attempt) => attempt.status === 429).length,
      noResponse: attempts.filter((attempt) => attempt.status === 0).length,
      unanswered: unanswered.length,
      executions: ok.filter((attempt) => !attempt.replayed).length,
    },
  };
}

export function orderIdOf(body: string): string | null {
  try {
    const parsed = JSON.parse(body) as { result?: { data?: { json?: { id?: unknown } } } };
    const id = parsed.result?.data?.json?.id;
    return typeof id === 'string' ? id : null;
  } catch {
    return null;
  }
}

function groupBy<T>(items: T[], keyOf: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const group = groups.get(key);
    if (group) group.push(item);
    else groups.set(key, [item]);
  }
  return groups;
}

const COLUMNS: Array<[string, keyof RunFigures]> = [
  ['fault / run', 'label'],
  ['runs', 'runs'],
  ['requests', 'requests'],
  ['dup orders', 'duplicateOrders'],
  ['dup charges', 'duplicateCharges'],
  ['lost acks', 'lostAcks'],
  ['4xx w/ effect', 'failuresWithEffect'],
  ['non-identical', 'nonIdenticalReplays'],
  ['stuck keys', 'stuckKeys'],
  ['5xx', 'responses5xx'],
  ['409', 'conflicts409'],
  ['429', 'tooMany429'],
  ['no resp', 'noResponse'],
  ['unanswered', 'unanswered'],
];

/** A fixed-width table of figures, one row each. */
export function formatTable(rows: RunFigures[]): string {
  const cells = [
    COLUMNS.map(([title]) => title),
    ...rows.map((row) => COLUMNS.map(([, key]) => String(row[key]))),
  ];
  const widths = COLUMNS.map((_, column) => Math.max(...cells.map((line) => (line[column] ?? '').length)));
  const lines = cells.map((line) => line.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join(' | '));
  lines.splice(1, 0, widths.map((width) => '-'.repeat(width)).join('-|-'));
  return lines.join('\n');
}

export function sumFigures(label: string, rows: RunFigures[]): RunFigures {
  const total: RunFigures = {
    label,
    runs: 0,
    intents: 0,
    requests: 0,
    duplicateOrders: 0,
    duplicateCharges: 0,
    lostAcks: 0,
    failuresWithEffect: 0,
    nonIdenticalReplays: 0,
    stuckKeys: 0,
    responses5xx: 0,
    conflicts409: 0,
    tooMany429: 0,
    noResponse: 0,
    unanswered: 0,
    executions: 0,
  };
  for (const row of rows) {
    for (const [, key] of COLUMNS) {
      if (key !== 'label') total[key] += row[key];
    }
    total.intents += row.intents;
    total.executions += row.executions;
  }
  return total;
}
