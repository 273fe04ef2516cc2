import { enableOfflineSchemaEngine } from '@idem/prisma-wasm-engine';
import { defineConfig } from 'prisma/config';

// Prisma 7's CLI downloads a native schema-engine binary before every command; this machine (and many
// air-gapped networks) cannot reach Prisma's binary host. Unless PRISMA_SCHEMA_ENGINE_BINARY is already set or
// PRISMA_OFFLINE_ENGINE=0, point the CLI's official hook at our wasm-based engine. The CLI loads this file before
// it looks for the engine, so plain `prisma generate|migrate …` works offline. See tooling/prisma-wasm-engine.
enableOfflineSchemaEngine();

export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: {
    path: 'prisma/migrations',
    seed: 'tsx tooling/dev-db/src/seed.ts',
  },
  // Read lazily by the commands that need a database; `prisma generate` works without DATABASE_URL.
  datasource: { url: process.env.DATABASE_URL },
});
