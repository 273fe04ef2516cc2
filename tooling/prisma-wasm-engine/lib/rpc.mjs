// The schema engine's JSON-RPC 2.0 protocol over stdin/stdout (one JSON object per line), served by the wasm
// engine. The CLI sends requests; for `migrate diff` the engine sends the CLI a `print` request back.
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { createDatabase as createDatabaseByHand, executeScript, PrismaError } from './database.mjs';
import { exitAfterFlush, forwardEngineLog, log } from './log.mjs';
import { createAdapterFactory } from './pg-adapter.mjs';
import { loadSchemaEngineWasm, takePanicMessage } from './wasm.mjs';

/**
 * @typedef {{ url?: string, shadowDatabaseUrl?: string }} Datasource
 * @typedef {{ jsonrpc: '2.0', id: string | number, method: string, params?: any }} RpcRequest
 * @typedef {import('@prisma/schema-engine-wasm').SchemaEngine} SchemaEngine
 */

/** JSON-RPC error code the native engine uses for every engine error (the details are in `data`). */
const ENGINE_ERROR_CODE = 4466;

/** The wasm engine's error when it will not use a shadow database (see `callEngine`). */
const NO_SHADOW_FACTORY = 'shadow DB must be provided through an external factory';

/** Raised when the wasm module traps: the instance cannot be trusted afterwards. */
class WasmPanic extends Error {}

/**
 * @param {{ datamodelPaths: string[], datasource: Datasource | undefined }} options
 */
export async function serveRpc({ datamodelPaths, datasource }) {
  const wasm = await loadSchemaEngineWasm();
  const adapters = datasource?.url ? createAdapterFactory({ ...datasource, url: datasource.url }) : undefined;

  /** @type {Promise<SchemaEngine> | undefined} */
  let engine;
  /** The wasm engine connects when it is created: create it on the first request that needs it, so that a
   *  connection error becomes that request's error response (and the next request tries again). */
  function getEngine() {
    if (!engine) {
      engine = (async () => {
        if (!adapters) {
          throw new PrismaError(
            undefined,
            'No datasource URL was passed to the schema engine (set datasource.url in prisma.config.ts).',
          );
        }
        /** @type {[string, string][]} */
        const datamodels = await Promise.all(
          datamodelPaths.map(
            async (path) => /** @type {[string, string]} */ ([path, await readFile(path, 'utf8')]),
          ),
        );
        // The CLI passes no schema for some commands (`migrate diff --from-empty --to-schema …`); an empty list
        // makes the wasm engine panic, `undefined` is its "no schema" mode.
        return wasm.SchemaEngine.new(
          { datamodels: datamodels.length > 0 ? datamodels : undefined },
          forwardEngineLog,
          adapters.factory,
        );
      })();
      engine.catch(() => {
        engine = undefined;
      });
    }
    return engine;
  }

  let nextPrintId = 1;
  /** @type {Map<string, () => void>} answers the CLI owes us for our `print` requests */
  const pendingPrints = new Map();
  /** Ask the CLI to print `content` on its stdout (that is how `migrate diff` output reaches the user). */
  function print(/** @type {string} */ content) {
    const id = `print-${nextPrintId++}`;
    return new Promise((resolve) => {
      pendingPrints.set(id, () => resolve(undefined));
      send({ jsonrpc: '2.0', id, method: 'print', params: { content } });
    });
  }

  /**
   * Methods map one-to-one onto the wasm engine's, except the few done by hand here.
   * @type {Record<string, (params: any) => Promise<unknown>>}
   */
  const handlers = {
    getDatabaseVersion: async (params) => (await getEngine()).version(params),
    createDatabase: async (params) => ({
      databaseName: await createDatabaseByHand(
        urlFrom(params?.datasource?.tag === 'ConnectionString' ? params.datasource.url : undefined),
      ),
    }),
    dbExecute: async (params) => {
      await executeScript(
        urlFrom(params?.datasourceType?.tag === 'url' ? params.datasourceType.url : undefined),
        params.script,
      );
      return null;
    },
    diff: async (params) => {
      const result = await (await getEngine()).diff(params);
      if (result.stdout) await print(result.stdout);
      return { ...result, stdout: null };
    },
    debugPanic: async () => {
      (await getEngine()).debugPanic();
      return null;
    },
  };
  /**
   * Call a wasm engine method, working around a wasm engine quirk: `evaluateDataLoss` and `createMigration` only
   * get a shadow database after a `diagnoseMigrationHistory`/`devDiagnostic` of the same migrations found the
   * history in sync; otherwise they fail with "PostgreSQL shadow DB must be provided through an external
   * factory". `migrate dev` hits that when it first applies pending migrations and then creates a new one. The
   * error is raised before anything is done, so diagnose the history (with a shadow database) and retry once.
   * @param {string} method
   * @param {any} params
   */
  async function callEngine(method, params) {
    const schemaEngine = /** @type {any} */ (await getEngine());
    try {
      return await schemaEngine[method](params);
    } catch (error) {
      const migrationsList = migrationsListOf(params);
      if (!migrationsList || !String(/** @type {any} */ (error)?.message).includes(NO_SHADOW_FACTORY))
        throw error;
      log('INFO', `${method}: diagnosing the migration history to get a shadow database, then retrying.`);
      await schemaEngine.diagnoseMigrationHistory({
        migrationsList,
        optInToShadowDatabase: true,
        filters: params.filters ?? { externalTables: [], externalEnums: [] },
      });
      return await schemaEngine[method](params);
    }
  }

  for (const method of [
    'applyMigrations',
    'createMigration',
    'devDiagnostic',
    'diagnoseMigrationHistory',
    'ensureConnectionValidity',
    'evaluateDataLoss',
    'introspect',
    'introspectSql',
    'markMigrationApplied',
    'markMigrationRolledBack',
    'reset',
    'schemaPush',
  ]) {
    handlers[method] = (params) => callEngine(method, params);
  }

  /** @param {string | undefined} url */
  function urlFrom(url) {
    const resolved = url ?? datasource?.url;
    if (!resolved) throw new PrismaError(undefined, 'No datasource URL was passed to the schema engine.');
    return resolved;
  }

  /** @type {RpcRequest | undefined} the request being handled */
  let current;

  /** @param {RpcRequest} request */
  async function handle(request) {
    current = request;
    try {
      await respond(request);
    } finally {
      current = undefined;
    }
  }

  /** @param {RpcRequest} request */
  async function respond(request) {
    const handler = Object.hasOwn(handlers, request.method) ? handlers[request.method] : undefined;
    if (!handler) {
      send({
        jsonrpc: '2.0',
        id: request.id,
        error: {
          code: -32601,
          message: `Method not found: ${request.method} (not supported by prisma-wasm-engine)`,
        },
      });
      return;
    }
    try {
      const result = await handler(request.params);
      send({ jsonrpc: '2.0', id: request.id, result: result ?? null });
    } catch (error) {
      const rpcError = toRpcError(error, adapters?.consumeError);
      log('ERROR', `${request.method} failed: ${rpcError.data.message}`);
      send({ jsonrpc: '2.0', id: request.id, error: rpcError });
      if (rpcError.data.is_panic) throw new WasmPanic(rpcError.data.message);
    }
  }

  // Requests are handled one at a time, in order, like the CLI sends them.
  let queue = Promise.resolve();
  let inFlight = 0;
  let shuttingDown = false;

  /** @param {number} code */
  async function shutdown(code) {
    if (shuttingDown) return;
    shuttingDown = true;
    await adapters?.dropPendingShadowDatabases();
    await exitAfterFlush(code);
  }

  const lines = createInterface({ input: process.stdin, crlfDelay: Number.POSITIVE_INFINITY });
  lines.on('line', (line) => {
    if (line.trim() === '') return;
    /** @type {any} */
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      log('ERROR', `Could not parse a JSON-RPC message from the CLI: ${line.slice(0, 200)}`);
      send({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
      return;
    }
    if (typeof message.method !== 'string') {
      // The CLI's answer to one of our `print` requests.
      pendingPrints.get(String(message.id))?.();
      pendingPrints.delete(String(message.id));
      return;
    }
    inFlight++;
    queue = queue
      .then(() => handle(message))
      .catch((error) => {
        log('ERROR', `The wasm schema engine panicked: ${error.message}`);
        return shutdown(101);
      })
      .finally(() => {
        inFlight--;
      });
  });
  lines.on('close', () => {
    // The CLI closed stdin: finish what was asked, then exit.
    queue.then(() => shutdown(0));
  });
  // A wasm panic can also surface outside the awaited promise (from a callback the wasm module scheduled):
  // answer the request being handled with the error, then exit (101 like a native engine panic, else 1).
  /** @param {unknown} error */
  function onCrash(error) {
    const rpcError = toRpcError(error, adapters?.consumeError);
    log('ERROR', `prisma-wasm-engine crashed: ${rpcError.data.message}`);
    if (current) send({ jsonrpc: '2.0', id: current.id, error: rpcError });
    shutdown(rpcError.data.is_panic ? 101 : 1);
  }
  process.on('uncaughtException', onCrash);
  process.on('unhandledRejection', onCrash);

  for (const signal of /** @type {const} */ (['SIGTERM', 'SIGINT'])) {
    process.on(signal, () => {
      if (inFlight > 0) log('ERROR', `Interrupted by ${signal} while a request was running.`);
      shutdown(inFlight > 0 ? 1 : 0);
    });
  }
}

/**
 * The migrations a request is about: its `migrationsList`, or a `migrate diff` side read from a directory.
 * @param {any} params
 */
function migrationsListOf(params) {
  if (params?.migrationsList) return params.migrationsList;
  for (const side of [params?.from, params?.to]) {
    if (side?.tag === 'migrations') {
      const { tag: _tag, ...migrationsList } = side;
      return migrationsList;
    }
  }
  return undefined;
}

/** @param {unknown} message */
function send(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

/**
 * Shape an error like the native engine's JSON-RPC errors.
 * @param {unknown} error
 * @param {((id: number) => unknown) | undefined} consumeDriverError resolves "External error id#N"
 */
function toRpcError(error, consumeDriverError) {
  const err = /** @type {{ message?: unknown, code?: unknown, stack?: unknown }} */ (error ?? {});
  let message = typeof err.message === 'string' ? err.message.trim() : String(error);
  // A Rust panic: the panic hook recorded its message, then the module trapped (WebAssembly.RuntimeError).
  const panicMessage = takePanicMessage();
  if (panicMessage || (error instanceof Error && error.name === 'RuntimeError')) {
    const panic = panicMessage || message;
    return {
      code: ENGINE_ERROR_CODE,
      message: panic,
      data: {
        is_panic: true,
        message: panic,
        meta: { full_error: panic },
        backtrace: String(err.stack ?? ''),
      },
    };
  }
  // A JavaScript error thrown inside the driver adapter reaches us only as an id into the adapter's registry.
  message = message.replace(/External error id#(\d+)/g, (text, id) => {
    const cause = /** @type {{ message?: unknown } | undefined} */ (consumeDriverError?.(Number(id)));
    return cause ? `${text}: ${typeof cause.message === 'string' ? cause.message : String(cause)}` : text;
  });
  /** @type {{ is_panic: boolean, message: string, meta: Record<string, unknown> | null, error_code?: string }} */
  const data = { is_panic: false, message, meta: null };
  if (error instanceof PrismaError && error.code) data.error_code = error.code;
  return { code: ENGINE_ERROR_CODE, message: 'An error happened. Check the data field for details.', data };
}
