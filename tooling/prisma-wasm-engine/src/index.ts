import { fileURLToPath } from 'node:url';

/** Absolute path of the schema-engine stand-in, for Prisma's `PRISMA_SCHEMA_ENGINE_BINARY` hook. */
export const schemaEngineBinaryPath: string = fileURLToPath(
  new URL('../bin/prisma-wasm-engine.mjs', import.meta.url),
);

/**
 * Make the Prisma CLI use the wasm schema engine instead of downloading its native binary, unless
 * `PRISMA_SCHEMA_ENGINE_BINARY` is already set (an explicit choice wins) or `PRISMA_OFFLINE_ENGINE=0`
 * (opt out: the CLI then downloads and uses the native engine as usual).
 *
 * @returns the engine path the CLI will use, or `undefined` for the native engine
 */
export function enableOfflineSchemaEngine(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.PRISMA_SCHEMA_ENGINE_BINARY) return env.PRISMA_SCHEMA_ENGINE_BINARY;
  if (env.PRISMA_OFFLINE_ENGINE === '0') return undefined;
  env.PRISMA_SCHEMA_ENGINE_BINARY = schemaEngineBinaryPath;
  return schemaEngineBinaryPath;
}
