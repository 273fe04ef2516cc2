/**
 * What the client half of @idem/idempotency adds to a browser bundle: the exports the checkout uses, bundled
 * and minified with esbuild, gzipped at level 9. React, TanStack Query and tRPC are external: the app ships
 * them anyway. `pnpm bench:client-size [--json]`
 */

import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const root = path.resolve(import.meta.dirname, '../..');
const entries = {
  'client + react (what the checkout imports)': `
    export { idempotencyHeaders, idempotentRetryLink } from '@idem/idempotency/client';
    export { useIdempotentMutation } from '@idem/idempotency/react';`,
  'client only (header + retry link)': `
    export { idempotencyHeaders, idempotentRetryLink } from '@idem/idempotency/client';`,
};

const results: Array<{ entry: string; minified: number; gzipped: number }> = [];
for (const [entry, contents] of Object.entries(entries)) {
  const output = await build({
    stdin: { contents, resolveDir: path.join(root, 'apps/web'), loader: 'ts' },
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    external: [
      'react',
      'react-dom',
      '@tanstack/react-query',
      '@trpc/client',
      '@trpc/server',
      '@trpc/tanstack-react-query',
    ],
    logLevel: 'error',
  });
  const code = output.outputFiles[0]?.contents ?? new Uint8Array();
  results.push({ entry, minified: code.byteLength, gzipped: gzipSync(code, { level: 9 }).byteLength });
}

if (process.argv.includes('--json')) {
  console.log(JSON.stringify(results, null, 2));
} else {
  for (const { entry, minified, gzipped } of results) {
    console.log(`${entry}: ${(minified / 1024).toFixed(2)} kB min, ${(gzipped / 1024).toFixed(2)} kB min+gz`);
  }
}
