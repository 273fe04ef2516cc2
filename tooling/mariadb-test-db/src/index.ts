/**
 * Test fixture: a Prisma client generated for provider "mysql" (the MariaDB key table only; `prisma generate`
 * runs offline through the wasm engine hook, see prisma.config.ts) on `@prisma/adapter-mariadb`, and scratch
 * databases on the local MariaDB so parallel runs never share a table. The library never imports this package.
 */
import { randomBytes } from 'node:crypto';
import { PrismaMariaDb } from '@prisma/adapter-mariadb';
import * as mariadb from 'mariadb';
import { PrismaClient } from './generated/prisma/client.ts';

export { PrismaClient as MariadbPrismaClient } from './generated/prisma/client.ts';

/** The server: MARIADB_URL, else the one on this machine and on CI's (root, empty password). */
export function mariadbServerUrl(): string {
  return process.env.MARIADB_URL ?? 'mariadb://root@127.0.0.1:3306/test';
}

/**
 * A Prisma client on `url` with a pool of `connectionLimit` connections; `wrapAdapter` wraps the driver adapter
 * factory before the client gets it (e.g. `withTransactionFence`).
 */
export function createMariadbPrismaClient(
  url: string,
  connectionLimit = 10,
  wrapAdapter: (factory: PrismaMariaDb) => PrismaMariaDb = (factory) => factory,
): PrismaClient {
  const { hostname, port, username, password, pathname } = new URL(url);
  const adapter = new PrismaMariaDb({
    host: hostname,
    port: Number(port || 3306),
    user: decodeURIComponent(username),
    password: decodeURIComponent(password),
    database: pathname.slice(1),
    connectionLimit,
  });
  return new PrismaClient({ adapter: wrapAdapter(adapter) });
}

export interface ScratchMariadb {
  name: string;
  url: string;
  /** Runs statements on the scratch database (e.g. the key table's DDL). */
  execute(statements: readonly string[]): Promise<void>;
  drop(): Promise<void>;
}

/** A new, empty database on the server; `drop()` removes it. */
export async function createScratchMariadb(prefix = 'idem_test'): Promise<ScratchMariadb> {
  const server = new URL(mariadbServerUrl());
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = () =>
    mariadb.createConnection({
      host: server.hostname,
      port: Number(server.port || 3306),
      user: decodeURIComponent(server.username),
      password: decodeURIComponent(server.password),
    });
  const connection = await admin();
  try {
    await connection.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`);
  } finally {
    await connection.end();
  }
  const url = new URL(server);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    async execute(statements) {
      const on = await admin();
      try {
        await on.query(`USE \`${name}\``);
        for (const statement of statements) await on.query(statement);
      } finally {
        await on.end();
      }
    },
    async drop() {
      const on = await admin();
      try {
        await on.query(`DROP DATABASE IF EXISTS \`${name}\``);
      } finally {
        await on.end();
      }
    },
  };
}
