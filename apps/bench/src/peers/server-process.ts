/**
 * One contender's server, as its own process: `node --import tsx server-process.ts <server>`. Reads
 * DATABASE_URL, BENCH_REDIS_URL, BENCH_PEERS_POOL, BENCH_PEERS_KEY_PREFIX; prints one JSON line
 * `{"ready": <port>}` on stdout once it listens on 127.0.0.1; stops on SIGTERM / SIGINT.
 */
import { createPrismaClient, pgAdapter } from '@idem/db';
import { withIdempotencyFastPath } from '@idem/idempotency/prisma';
import { closeServer, listen } from './http.ts';
import { type ServerName, serverNames } from './server-names.ts';
import { startExpressIdempotency } from './servers/express-idempotency.ts';
import { startIdem } from './servers/idem.ts';
import { startNodeIdempotency } from './servers/node-idempotency.ts';
import { startNone } from './servers/none.ts';
import { startPowertools } from './servers/powertools.ts';
import type { StartServer } from './servers/types.ts';

const starters: Record<ServerName, StartServer> = {
  none: startNone,
  idem: startIdem,
  'node-idempotency': startNodeIdempotency,
  'express-idempotency': startExpressIdempotency,
  powertools: startPowertools,
};

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}

async function main() {
  const name = process.argv[2];
  if (!serverNames.includes(name as ServerName))
    throw new Error(`usage: server-process.ts <${serverNames.join('|')}>`);
  const dbAdapter = withIdempotencyFastPath(
    pgAdapter({
      connectionString: required('DATABASE_URL'),
      max: Number(process.env.BENCH_PEERS_POOL ?? 10),
    }),
  );
  const db = createPrismaClient({ adapter: dbAdapter });
  const started = await starters[name as ServerName]({
    db,
    dbAdapter,
    redisUrl: required('BENCH_REDIS_URL'),
    keyPrefix: required('BENCH_PEERS_KEY_PREFIX'),
  });
  const port = await listen(started.server);
  process.stdout.write(`${JSON.stringify({ ready: port })}\n`);

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await closeServer(started.server);
    await started.close();
    await db.$disconnect();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop());
  process.once('SIGINT', () => void stop());
}

main().catch((error) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
  process.exit(1);
});
