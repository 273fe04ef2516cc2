/**
 * What the client half of @idem/idempotency adds to a browser bundle: the exports the checkout uses, bundled
 * and minified with esbuild, gzipped at level 9. React, TanStack Query and tRPC are external: the app ships
 * them anyway. Prints, per entry, the total and where the minified bytes come from (esbuild's metafile).
 * `pnpm bench:client-size [--json]`
 */

import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { repoRoot } from './repository.ts';

const entries = {
  'client + react (what the checkout imports)': `
    export { idempotencyHeaders, idempotentRetryLink } from '@idem/idempotency/client';
    export { useIdempotentMutation } from '@idem/idempotency/react';`,
  'client only (header + retry link)': `
    export { idempotencyHeaders, idempotentRetryLink } from '@idem/idempotency/client';`,
};

interface EntrySize {
  entry: string;
  minified: number;
  gzipped: number;
  /** Minified bytes each source module contributes to the output, largest first. */
  modules: Array<{ module: string; minified: number }>;
}

const results: EntrySize[] = [];
for (const [entry, contents] of Object.entries(entries)) {
  const output = await build({
    // Resolved as the checkout resolves them; module paths in the metafile relative to the repository.
    stdin: { contents, resolveDir: path.join(repoRoot, 'apps/web'), loader: 'ts' },
    absWorkingDir: repoRoot,
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    metafile: true,
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
  const inputs = Object.values(output.metafile.outputs)[0]?.inputs ?? {};
  const modules = Object.entries(inputs)
    .filter(([, input]) => input.bytesInOutput > 0)
    .map(([file, input]) => ({
      module: file.replace(/^packages\/idempotency\/src\//, '').replace(/\.ts$/, ''),
      minified: input.bytesInOutput,
    }))
    .sort((a, b) => b.minified - a.minified);
  results.push({
    entry,
    minified: code.byteLength,
    gzipped: gzipSync(code, { level: 9 }).byteLength,
    modules,
  });
}

const kB = (bytes: number) => (bytes / 1024).toFixed(2);
if (process.argv.includes('--json')) {
  console.log(JSON.stringify(results, null, 2));
} else {
  for (const { entry, minified, gzipped, modules } of results) {
    console.log(`${entry}: ${kB(minified)} kB min, ${kB(gzipped)} kB min+gz`);
    for (const { module, minified: bytes } of modules) {
      console.log(`  ${module.padEnd(34)} ${String(bytes).padStart(6)} B min`);
    }
  }
}
