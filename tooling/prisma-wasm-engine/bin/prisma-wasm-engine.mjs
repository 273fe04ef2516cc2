#!/usr/bin/env node
// A stand-in for Prisma's native `schema-engine` binary, built on Prisma's npm-published WebAssembly schema
// engine (@prisma/schema-engine-wasm) and @prisma/adapter-pg, for machines that cannot download the native
// engine. The Prisma CLI runs it through its official hook: PRISMA_SCHEMA_ENGINE_BINARY=<this file>.
//
//   prisma-wasm-engine --version
//   prisma-wasm-engine [--datamodels <schema.prisma>]… [--datasource '{"url":…,"shadowDatabaseUrl":…}']
//                      [cli can-connect-to-database|create-database|drop-database]
//
// Without `cli …` it serves the engine's JSON-RPC protocol on stdin/stdout. Logs are JSON lines on stderr.
// Errors: an ERROR log line and exit code 1, never a silent success. PostgreSQL only.
import { parseArgs } from 'node:util';
import { canConnect, createDatabase, dropDatabase, PrismaError } from '../lib/database.mjs';
import { exitAfterFlush, log, logError } from '../lib/log.mjs';
import { serveRpc } from '../lib/rpc.mjs';
import { loadSchemaEngineWasm } from '../lib/wasm.mjs';

/** @type {Record<string, (url: string) => Promise<unknown>>} */
const CLI_COMMANDS = {
  'can-connect-to-database': canConnect,
  'create-database': createDatabase,
  'drop-database': dropDatabase,
};

async function main() {
  // The CLI skips the first stderr line of an engine; make it this one (before anything can fail).
  const versionOnly = process.argv.slice(2).every((arg) => arg === '--version' || arg === '-V');
  if (!versionOnly)
    log('INFO', 'Starting prisma-wasm-engine (@prisma/schema-engine-wasm on @prisma/adapter-pg)');

  const { values, positionals } = parseArgs({
    options: {
      datamodels: { type: 'string', multiple: true, default: [] },
      datasource: { type: 'string' },
      // Passed by the CLI for some setups; the wasm engine has no use for them.
      'enabled-preview-features': { type: 'string' },
      'extension-types': { type: 'string' },
      version: { type: 'boolean', short: 'V' },
    },
    allowPositionals: true,
  });

  if (values.version) {
    const wasm = await loadSchemaEngineWasm();
    process.stdout.write(`schema-engine-wasm ${wasm.version()} (prisma-wasm-engine)\n`);
    return 0;
  }

  /** @type {{ url?: string, shadowDatabaseUrl?: string } | undefined} */
  let datasource;
  if (values.datasource !== undefined) {
    try {
      datasource = JSON.parse(values.datasource);
    } catch {
      throw new PrismaError(undefined, '--datasource is not valid JSON.');
    }
  }

  if (positionals.length > 0) {
    const [keyword, command, ...rest] = positionals;
    const run =
      command !== undefined && Object.hasOwn(CLI_COMMANDS, command) ? CLI_COMMANDS[command] : undefined;
    if (keyword !== 'cli' || !run || rest.length > 0) {
      throw new PrismaError(
        undefined,
        `Unsupported arguments: ${positionals.join(' ')} (expected: cli ${Object.keys(CLI_COMMANDS).join('|')}).`,
      );
    }
    if (!datasource?.url) throw new PrismaError(undefined, `cli ${command} needs --datasource with a url.`);
    await run(datasource.url);
    return 0;
  }

  await serveRpc({ datamodelPaths: values.datamodels ?? [], datasource });
  return undefined; // keeps running until the CLI closes stdin
}

main().then(
  (code) => {
    if (code !== undefined) return exitAfterFlush(code);
  },
  (error) => {
    logError(
      error instanceof Error ? error.message : String(error),
      error instanceof PrismaError ? error.code : undefined,
    );
    return exitAfterFlush(1);
  },
);
