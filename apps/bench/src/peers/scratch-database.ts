/**
 * The peers sections' database: a scratch database on DATABASE_URL's server (default
 * postgresql://postgres@127.0.0.1:5432), migrated (Idem needs `idempotency_keys`) and given `bench_effects` as
 * apps/bench/src/run.ts creates it; dropped afterwards, also on Ctrl-C.
 */
import pg from 'pg';
import {
  createDatabase,
  dropDatabase,
  messageOf,
  migrateDatabase,
  redact,
  scratchDatabaseName,
  useExternalServer,
  withDatabase,
} from '../repository.ts';
import { BENCH_EFFECTS_TABLE } from './effect.ts';

export async function withPeersDatabase<T>(
  log: (line: string) => void,
  use: (databaseUrl: string) => Promise<T>,
): Promise<T> {
  const server = await useExternalServer(process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432');
  const name = scratchDatabaseName('idem_bench_peers');
  const databaseUrl = await createDatabase(server.adminUrl, name);
  let dropping: Promise<void> | undefined;
  const drop = () => {
    dropping ??= dropDatabase(server.adminUrl, name).catch((error) =>
      log(`drop ${name}: ${messageOf(error)}`),
    );
    return dropping;
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.once(signal, () => {
      log(`${signal}: dropping the scratch database`);
      void drop().finally(() => process.exit(130));
    });
  try {
    log(`scratch database ${name} on ${redact(withDatabase(server.adminUrl, ''))}`);
    await migrateDatabase(databaseUrl);
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    await client.query(BENCH_EFFECTS_TABLE).finally(() => client.end());
    return await use(databaseUrl);
  } finally {
    await drop();
  }
}
