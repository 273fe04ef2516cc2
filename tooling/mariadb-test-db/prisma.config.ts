import { enableOfflineSchemaEngine } from '@idem/prisma-wasm-engine';
import { defineConfig } from 'prisma/config';

// `prisma generate` needs no database, but the CLI fetches its native engine before any command: the same
// offline hook as the root prisma.config.ts (see tooling/prisma-wasm-engine).
enableOfflineSchemaEngine();

export default defineConfig({ schema: 'prisma/schema.prisma' });
