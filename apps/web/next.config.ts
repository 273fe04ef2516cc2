import type { NextConfig } from 'next';

const config: NextConfig = {
  // Workspace packages export TypeScript source; Next compiles them.
  transpilePackages: ['@idem/db'],
  // Native/driver packages stay in node_modules instead of being bundled.
  serverExternalPackages: ['pg', '@prisma/adapter-pg', 'pino', 'prom-client'],
  // `pnpm typecheck` (tsc 7) checks types; Next's own check needs the TypeScript 5 JS API.
  typescript: { ignoreBuildErrors: true },
  poweredByHeader: false,
  // forbidden() / unauthorized(): /admin answers a real 403 (or 401) with app/forbidden.tsx (unauthorized.tsx).
  experimental: { authInterrupts: true },
};

export default config;
