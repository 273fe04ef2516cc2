/**
 * Soak: `pnpm test:soak` (not part of `pnpm test`). ROUNDS rounds × KEYS parallel keys (2 clients each) against
 * 3 web processes (the app's test server) that SIGKILL themselves at random fault points (IDEM_FAULT_RATE per hit) and are
 * also SIGKILLed from outside at random moments; a supervisor restarts every dead process with a freshly drawn
 * fault point. After each round the invariant checker runs; a final table sums it up. Exit code 1 on any
 * violated invariant.
 *
 *   SOAK_ROUNDS=20 SOAK_KEYS=50 SOAK_FAULT_RATE=0.05 SOAK_ADMIN_URL=postgresql://postgres@127.0.0.1:5432/postgres
 *
 * Needs a Postgres server (SOAK_ADMIN_URL, else
 * DATABASE_URL's server, else 127.0.0.1:5432).
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, type FaultEnv } from './harness/cluster.ts';
import { checkInvariants, formatTable, type RunFigures, sumFigures } from './harness/invariants.ts';
import { type Attempt, storm } from './harness/load.ts';
import { createScenario, SCENARIO_STOCK } from './harness/scenario.ts';

const ROUNDS = Number(process.env.SOAK_ROUNDS ?? 20);
const KEYS = Number(process.env.SOAK_KEYS ?? 50);
const CLIENTS_PER_KEY = 2;
const FAULT_RATE = Number(process.env.SOAK_FAULT_RATE ?? 0.05);
const LEASE_SECONDS = Number(process.env.SOAK_LEASE_SECONDS ?? 2);
const POINTS = ['after-claim', 'before-complete', 'after-complete'] as const;

const adminUrl =
  process.env.SOAK_ADMIN_URL ??
  (process.env.DATABASE_URL
    ? (() => {
        const url = new URL(process.env.DATABASE_URL);
        url.pathname = '/postgres';
        return url.toString();
      })()
    : 'postgresql://postgres@127.0.0.1:5432/postgres');

function randomFaultEnv(): FaultEnv {
  const point = POINTS[Math.floor(Math.random() * POINTS.length)] ?? 'after-claim';
  return { IDEM_FAULT_POINT: point, IDEM_FAULT_RATE: String(FAULT_RATE) };
}

async function main() {
  const started = Date.now();
  console.log(
    `soak: ${ROUNDS} rounds × ${KEYS} keys × ${CLIENTS_PER_KEY} clients, 3 processes, lease ${LEASE_SECONDS} s`,
  );
  const cluster = await Cluster.start({
    adminUrl,
    processes: 3,
    env: { IDEM_LEASE_SECONDS: String(LEASE_SECONDS) },
  });
  console.log(`web process logs: ${cluster.logDir}`);
  let done = false;
  let faultKills = 0;
  let externalKills = 0;
  let restarts = 0;
  const supervisors = cluster.nodes.map(async (node) => {
    await cluster.stopNode(node.index);
    let first = true;
    while (!done) {
      if (!first) await cluster.node(node.index).exited;
      if (done) break;
      for (let attempt = 0; !done; attempt += 1) {
        try {
          await cluster.startNode(node.index, randomFaultEnv());
          if (!first) restarts += 1;
          break;
        } catch (error) {
          if (done) break;
          console.log(`restart of #${node.index} failed (${attempt + 1}): ${(error as Error).message}`);
          if (attempt >= 5) throw error;
          await sleep(200);
        }
      }
      first = false;
    }
  });
  await sleep(100);
  while (!cluster.nodes.every((node) => cluster.isAlive(node.index))) await sleep(100);

  const rows: RunFigures[] = [];
  const violations: string[] = [];
  try {
    const scenario = await createScenario(cluster, 'soak');
    for (let round = 1; round <= ROUNDS; round += 1) {
      const killsBefore = cluster.nodes.reduce((sum, node) => sum + node.unexpectedExits, 0);
      const externalBefore = externalKills;
      const intents = Array.from({ length: KEYS }, () => ({ intent: scenario.intent(), key: randomUUID() }));
      // Outside SIGKILLs at random moments of the round (none, one or two).
      const killer = (async () => {
        const kills = Math.floor(Math.random() * 3);
        for (let i = 0; i < kills; i += 1) {
          await sleep(Math.random() * 1_500);
          const index = Math.floor(Math.random() * cluster.nodes.length);
          if (cluster.isAlive(index)) {
            await cluster.killNode(index);
            externalKills += 1;
          }
        }
      })();
      const attempts = await storm(KEYS * CLIENTS_PER_KEY, (i) => {
        const { intent, key } = intents[i % KEYS] ?? { intent: '', key: '' };
        return {
          urls: () => cluster.urls(),
          token: scenario.tokenFor(i % KEYS),
          intent,
          key,
          input: scenario.input(intent),
          maxAttempts: 40,
          deadlineMs: 60_000,
        };
      });
      await killer;
      const fiveHundreds = new Map<string, number>();
      for (const attempt of attempts.filter((sent) => sent.status >= 500)) {
        const summary = `${attempt.status} ${errorMessageOf(attempt.body)}`;
        fiveHundreds.set(summary, (fiveHundreds.get(summary) ?? 0) + 1);
      }
      const checked = await checkInvariants(cluster.db, attempts, { label: `round ${round}` });
      const strayUnits = await stockHeldByNoOrder(cluster, scenario.sku);
      if (strayUnits !== 0)
        checked.violations.push(`stock: ${strayUnits} unit(s) taken or given back by no order`);
      const roundFaultKills =
        cluster.nodes.reduce((sum, node) => sum + node.unexpectedExits, 0) - killsBefore;
      faultKills += roundFaultKills;
      rows.push(checked.figures);
      violations.push(...checked.violations.map((violation) => `round ${round}: ${violation}`));
      const f = checked.figures;
      console.log(
        `round ${String(round).padStart(2)}: requests=${f.requests} kills(fault/outside)=${roundFaultKills}/${externalKills - externalBefore} ` +
          `dupOrders=${f.duplicateOrders} dupCharges=${f.duplicateCharges} lostAcks=${f.lostAcks} stuck=${f.stuckKeys} ` +
          `5xx=${f.responses5xx} 409=${f.conflicts409} 429=${f.tooMany429} noResp=${f.noResponse} unanswered=${f.unanswered} executions=${f.executions}`,
      );
      for (const [summary, count] of fiveHundreds) console.log(`          ${count} × ${summary}`);
      for (const attempt of attempts.filter((sent) => sent.status >= 500)) {
        for (const line of explainServerError(cluster, attempt)) console.log(`          ${line}`);
      }
    }
  } finally {
    done = true;
    await Promise.all(cluster.nodes.map((node) => cluster.stopNode(node.index)));
    await Promise.allSettled(supervisors);
    await cluster.close(); // stops whatever a supervisor started meanwhile
  }
  const total = sumFigures(`TOTAL (${ROUNDS} rounds)`, rows);
  total.runs = ROUNDS;
  console.log(`\n${formatTable([...rows, total])}`);
  console.log(
    `\nSIGKILLs: ${faultKills} at fault points, ${externalKills} from outside; ${restarts} restarts; ` +
      `${total.intents} intents, ${total.executions} executions; ${((Date.now() - started) / 1000).toFixed(0)} s`,
  );
  if (violations.length > 0) {
    console.log(`\nINVARIANT VIOLATIONS (${violations.length}):\n${violations.slice(0, 50).join('\n')}`);
    process.exitCode = 1;
  } else {
    console.log('\nall invariants held');
  }
}

/**
 * The product's stock against its orders: every unit gone is held by an order that is not `payment_failed`
 * (pending, paid, shipped, refunded), and every failed order gave its units back. Non-zero: units taken or
 * given back by no order (positive: held by nobody; negative: given back twice).
 */
async function stockHeldByNoOrder(cluster: Cluster, sku: string): Promise<number> {
  const [row] = await cluster.db.$queryRaw<Array<{ stray: number }>>`
    select ((${SCENARIO_STOCK}::int - p.stock)
            - coalesce((select sum(i.quantity) from order_items i join orders o on o.id = i.order_id
                         where i.sku = ${sku} and o.status <> 'payment_failed'), 0))::int as stray
      from products p where p.sku = ${sku}`;
  return row?.stray ?? 0;
}

/**
 * What the servers logged about a 5xx: the log line carrying the errorId of its body; for a 5xx without one
 * (not answered by tRPC), every warning, error and non-JSON line (a stack trace on stderr) of the process that
 * answered it.
 */
function explainServerError(cluster: Cluster, attempt: Attempt): string[] {
  const errorId = errorIdOf(attempt.body);
  const header = `${attempt.status} from web #${attempt.node} at ${new Date(attempt.startedAt).toISOString()}`;
  if (errorId) {
    const lines = cluster.logLinesContaining(errorId);
    return [`${header}, errorId ${errorId}:`, ...(lines.length > 0 ? lines : ['(no log line has this id)'])];
  }
  const lines = cluster
    .logLinesContaining('')
    .filter(
      (line) =>
        line.startsWith(`web-${attempt.node}-`) && !isQuietLogLine(line.slice(line.indexOf(': ') + 2)),
    );
  return [
    `${header}, no errorId; body ${attempt.body.slice(0, 300)}; that process logged:`,
    ...lines.slice(-20),
  ];
}

function isQuietLogLine(line: string): boolean {
  if (line.trim() === '') return true;
  try {
    const parsed = JSON.parse(line) as { level?: number };
    return (parsed.level ?? 0) < 40;
  } catch {
    return false;
  }
}

function errorIdOf(body: string): string | null {
  try {
    const parsed = JSON.parse(body) as { error?: { json?: { data?: { errorId?: unknown } } } };
    const errorId = parsed.error?.json?.data?.errorId;
    return typeof errorId === 'string' ? errorId : null;
  } catch {
    return null;
  }
}

function errorMessageOf(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { json?: { message?: string } } };
    return (parsed.error?.json?.message ?? body).slice(0, 300);
  } catch {
    return body.slice(0, 300);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
