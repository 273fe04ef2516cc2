import { enableOfflineSchemaEngine } from '@idem/prisma-wasm-engine';
import { defineConfig } from 'prisma/config';

// Prisma 7's CLI downloads a native schema-engine binary before every command. Where that host is unreachable
// (air-gapped networks, this repository's CI), point the CLI's official hook at the wasm-based engine instead;
// `PRISMA_SCHEMA_ENGINE_BINARY` or `PRISMA_OFFLINE_ENGINE=0` keep the native one. Outside this repository, drop
// these two lines and the dependency: nothing else depends on them.
enableOfflineSchemaEngine();

export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  // Read lazily by the commands that need a database; `prisma generate` works without DATABASE_URL.
  datasource: { url: process.env.DATABASE_URL },
});
