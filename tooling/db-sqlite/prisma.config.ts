import { enableOfflineSchemaEngine } from '@idem/prisma-wasm-engine';
import { defineConfig } from 'prisma/config';

// `prisma generate` needs no database and, with the schema-engine hook set, downloads nothing (see
// tooling/prisma-wasm-engine). The tests create the table from `sqliteIdempotencyKeysSchema().statements`.
enableOfflineSchemaEngine();

export default defineConfig({
  schema: 'prisma/schema.prisma',
  datasource: { url: 'file:./unused.db' },
});
