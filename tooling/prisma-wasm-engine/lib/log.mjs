// Logging in the format the Prisma CLI expects from a schema engine: one JSON object per line on stderr,
// `{ timestamp, level, fields: { message, ... }, target }`. The CLI ignores the very first stderr line,
// collects the `message` of every line, and reports the last `ERROR` line if the engine exits with code 1.
// For `cli <command>` invocations it looks for an ERROR line with target `schema_engine::logger` carrying
// `fields.error_code` (for example P1003 "database does not exist", which makes `migrate dev` create it).

/** Target the CLI looks for when it parses `cli <command>` failures. */
export const ERROR_TARGET = 'schema_engine::logger';

const TARGET = 'prisma_wasm_engine';

/**
 * @param {'ERROR' | 'WARN' | 'INFO' | 'DEBUG'} level
 * @param {string} message
 * @param {Record<string, unknown>} [fields]
 * @param {string} [target]
 */
export function log(level, message, fields = {}, target = TARGET) {
  writeLine({ timestamp: new Date().toISOString(), level, fields: { message, ...fields }, target });
}

/**
 * Report a fatal error the way the native engine does (an ERROR line the CLI can show).
 * @param {string} message
 * @param {string} [errorCode] a Prisma error code such as P1001
 */
export function logError(message, errorCode) {
  log('ERROR', message, errorCode ? { error_code: errorCode } : {}, ERROR_TARGET);
}

/**
 * The wasm engine hands us its log lines as JSON strings without a timestamp; add one and pass them on.
 * @param {unknown} line
 */
export function forwardEngineLog(line) {
  const text = String(line).trim();
  if (text === '') return;
  try {
    const parsed = JSON.parse(text);
    writeLine({ timestamp: new Date().toISOString(), ...parsed });
  } catch {
    log('INFO', text, {}, 'schema_engine_wasm');
  }
}

/** @param {unknown} value */
function writeLine(value) {
  process.stderr.write(`${JSON.stringify(value)}\n`);
}

/**
 * Exit once stdout and stderr have been flushed (they can be asynchronous pipes on some platforms).
 * @param {number} code
 * @returns {Promise<never>}
 */
export async function exitAfterFlush(code) {
  await Promise.all(
    [process.stdout, process.stderr].map(
      (stream) => new Promise((resolve) => stream.write('', () => resolve(undefined))),
    ),
  );
  process.exit(code);
}
