/**
 * The scratch database an in-process profile runs on (bench:profile, bench:cpu, bench:replay-burst): on
 * DATABASE_URL's server, migrated (the library's key table), with the table THE handler writes (effect.ts), and a
 * node-pg client connected to it for the arms that send SQL themselves.
 */
import pg from 'pg';
import { BENCH_EFFECTS_TABLE } from '../peers/effect.ts';
import {
  createDatabase,
  dropDatabase,
  migrateDatabase,
  scratchDatabaseName,
  useExternalServer,
} from '../repository.ts';

export interface ProfileDatabase {
  url: string;
  /** A node-pg client of the database, connected. */
  sql: pg.Client;
  /** Ends `sql` and drops the database: call it last, once the caller's own clients of it have disconnected. */
  drop(): Promise<void>;
}

/** A fresh database named after `prefix`; dropped again when it cannot be made ready. */
export async function createProfileDatabase(prefix: string): Promise<ProfileDatabase> {
  const server = await useExternalServer(process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432');
  const name = scratchDatabaseName(prefix);
  const url = await createDatabase(server.adminUrl, name);
  const sql = new pg.Client({ connectionString: url });
  const drop = async () => {
    await sql.end().catch(() => {});
    await dropDatabase(server.adminUrl, name);
  };
  try {
    await migrateDatabase(url);
    await sql.connect();
    await sql.query(BENCH_EFFECTS_TABLE);
  } catch (error) {
    await drop();
    throw error;
  }
  return { url, sql, drop };
}
