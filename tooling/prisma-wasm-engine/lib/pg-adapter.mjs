// The driver adapter handed to the wasm schema engine: `@prisma/adapter-pg` with these fixes.
//
// 1. adapter-pg 7.10.1 cannot map Postgres' internal single-byte `"char"` type (OID 18), which the engine reads
//    from pg_constraint/pg_class while describing a schema. Its rows are already plain strings; we let adapter-pg
//    treat the column as text and then report it as ColumnType Character.
// 2. adapter-pg's executeScript splits scripts on every `;` (breaks on semicolons in strings, comments and
//    function bodies) and runs the pieces one by one. We send the whole script as one simple-protocol query,
//    like the native engine: a failing migration leaves nothing half-applied.
// 3. adapter-pg's connectToShadowDb drops the shadow database while its own pool is still connected ("being
//    accessed by other users"). We create the shadow database ourselves and drop it `WITH (FORCE)` after
//    closing the pool.
// 4. A shadow database configured with `shadowDatabaseUrl` is emptied before and after use, as the native
//    engine does (the wasm engine would apply the migrations on top of whatever it contains).
import { randomUUID } from 'node:crypto';
import { PrismaPg } from '@prisma/adapter-pg';
import { bindMigrationAwareSqlAdapterFactory, ColumnTypeEnum } from '@prisma/driver-adapter-utils';
import {
  createDatabase,
  dropDatabase,
  PrismaError,
  parseDatabaseUrl,
  resetDatabase,
  withDatabase,
} from './database.mjs';
import { log } from './log.mjs';

const PG_CHAR_OID = 18;
const PG_TEXT_OID = 25;

/**
 * @typedef {{ sql: string, args: unknown[], argTypes: unknown[] }} SqlQuery
 * @typedef {{ fields: { dataTypeID: number }[] }} PgResult
 * @typedef {{ columnNames: string[], columnTypes: number[], rows: unknown[][] }} ResultSet
 * @typedef {{
 *   performIO(query: SqlQuery): Promise<PgResult>,
 *   queryRaw(query: SqlQuery): Promise<ResultSet>,
 *   onError(error: unknown): never,
 *   startTransaction?: (isolationLevel?: string) => Promise<Queryable>,
 *   executeScript?: (script: string) => Promise<void>,
 *   underlyingDriver?: () => { query(sql: string): Promise<unknown> },
 *   dispose?: () => Promise<void>,
 * }} Queryable  the parts of adapter-pg's (unexported) PgQueryable classes that we patch
 */

/**
 * Teach a connection or transaction object about the `"char"` type.
 * @param {Queryable} queryable
 */
function patchCharType(queryable) {
  if (typeof queryable.performIO !== 'function' || typeof queryable.queryRaw !== 'function') {
    throw new Error(
      '@prisma/adapter-pg internals changed (no performIO/queryRaw): re-test prisma-wasm-engine.',
    );
  }
  /** @type {WeakMap<SqlQuery, number[]>} which result columns of a query were `"char"` */
  const charColumns = new WeakMap();
  const performIO = queryable.performIO.bind(queryable);
  const queryRaw = queryable.queryRaw.bind(queryable);
  // queryRaw(query) calls this.performIO(query) with the same query object: remember the columns per query.
  queryable.performIO = async (query) => {
    const result = await performIO(query);
    /** @type {number[]} */
    const indexes = [];
    result.fields.forEach((field, index) => {
      if (field.dataTypeID === PG_CHAR_OID) {
        field.dataTypeID = PG_TEXT_OID;
        indexes.push(index);
      }
    });
    if (indexes.length > 0) charColumns.set(query, indexes);
    return result;
  };
  queryable.queryRaw = async (query) => {
    const resultSet = await queryRaw(query);
    for (const index of charColumns.get(query) ?? []) resultSet.columnTypes[index] = ColumnTypeEnum.Character;
    charColumns.delete(query);
    return resultSet;
  };
}

/**
 * Patch a connection (and the transactions it starts).
 * @param {Queryable} adapter
 */
function patchAdapter(adapter) {
  patchCharType(adapter);
  const startTransaction = adapter.startTransaction?.bind(adapter);
  if (startTransaction) {
    adapter.startTransaction = async (isolationLevel) => {
      const transaction = await startTransaction(isolationLevel);
      patchCharType(transaction);
      return transaction;
    };
  }
  const pool = adapter.underlyingDriver?.();
  if (!pool)
    throw new Error(
      '@prisma/adapter-pg internals changed (no underlyingDriver): re-test prisma-wasm-engine.',
    );
  adapter.executeScript = async (script) => {
    try {
      await pool.query(script);
    } catch (error) {
      adapter.onError(error); // throws the DriverAdapterError the engine understands
    }
  };
  return adapter;
}

/**
 * A `pg` adapter for a URL, honouring Prisma's `?schema=` parameter.
 * @param {string} url
 */
function pgAdapterFactory(url) {
  const { connectionString, schema } = parseDatabaseUrl(url);
  /** @type {import('pg').PoolConfig} */
  const config = { connectionString };
  if (schema) config.options = `-c search_path=${schema}`;
  return new PrismaPg(config, schema ? { schema } : undefined);
}

/**
 * @param {string} a
 * @param {string} b
 */
function sameDatabase(a, b) {
  const [x, y] = [parseDatabaseUrl(a), parseDatabaseUrl(b)];
  return x.host === y.host && x.port === y.port && x.database === y.database;
}

/**
 * The migration-aware adapter factory for `SchemaEngine.new`.
 * @param {{ url: string, shadowDatabaseUrl?: string }} datasource
 */
export function createAdapterFactory(datasource) {
  const main = pgAdapterFactory(datasource.url);
  /** Shadow databases created by us and not dropped yet (dropped on exit as a last resort). */
  const pendingShadowDatabases = new Set();

  const factory = {
    provider: main.provider,
    adapterName: main.adapterName,
    async connect() {
      return patchAdapter(/** @type {Queryable} */ (/** @type {unknown} */ (await main.connect())));
    },
    async connectToShadowDb() {
      const configuredUrl = datasource.shadowDatabaseUrl;
      if (configuredUrl) {
        // A shadow database configured by the user (for example without CREATEDB rights): never create or drop
        // it, but empty it before and after use like the native engine (the wasm engine does not).
        if (sameDatabase(configuredUrl, datasource.url)) {
          throw new PrismaError(
            undefined,
            'shadowDatabaseUrl points at the main database; it must be a separate, disposable database.',
          );
        }
        await resetDatabase(configuredUrl);
        const adapter = /** @type {Queryable} */ (
          /** @type {unknown} */ (await pgAdapterFactory(configuredUrl).connect())
        );
        const dispose = adapter.dispose?.bind(adapter);
        adapter.dispose = async () => {
          await dispose?.();
          await resetDatabase(configuredUrl);
        };
        return patchAdapter(adapter);
      }
      const shadowUrl = withDatabase(datasource.url, `prisma_migrate_shadow_db_${randomUUID()}`);
      const { database } = parseDatabaseUrl(shadowUrl);
      await createDatabase(shadowUrl);
      pendingShadowDatabases.add(shadowUrl);
      log('INFO', `Created shadow database \`${database}\`.`);
      const adapter = /** @type {Queryable} */ (
        /** @type {unknown} */ (await pgAdapterFactory(shadowUrl).connect())
      );
      const dispose = adapter.dispose?.bind(adapter);
      adapter.dispose = async () => {
        await dispose?.(); // close the pool first…
        await dropDatabase(shadowUrl); // …then drop, forcing out anything still connected
        pendingShadowDatabases.delete(shadowUrl);
        log('INFO', `Dropped shadow database \`${database}\`.`);
      };
      return patchAdapter(adapter);
    },
  };
  const bound = bindMigrationAwareSqlAdapterFactory(/** @type {any} */ (factory));

  return {
    factory: bound,
    /**
     * The driver's error behind an "External error id#N" message, if any.
     * @param {number} id
     * @returns {unknown}
     */
    consumeError(id) {
      return bound.errorRegistry.consumeError(id)?.error;
    },
    /** Drop shadow databases the engine did not dispose of (crash, interrupted command). */
    async dropPendingShadowDatabases() {
      for (const url of pendingShadowDatabases) {
        await dropDatabase(url).catch((error) =>
          log('WARN', `Could not drop shadow database ${parseDatabaseUrl(url).database}: ${error.message}`),
        );
        pendingShadowDatabases.delete(url);
      }
    },
  };
}
