/**
 * What the client half of @idem/idempotency adds to a browser bundle: the exports the checkout uses, bundled
 * and minified with esbuild, gzipped at level 9. React, TanStack Query and tRPC are external: the app ships
 * them anyway. Prints, per entry, the total and where the bytes come from: each module's minified bytes
 * (esbuild's metafile) and its gzip marginal — what the gzipped bundle loses without that module's code, which
 * is what a size pass can win (the marginals do not add up to the total: gzip shares repeats across modules).
 * `pnpm bench:client-size [--json]`
 */

import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { type BuildOptions, build, transform } from 'esbuild';
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
  /**
   * Per source module, largest gzip marginal first: its minified bytes in the output, and the gzipped bytes the
   * bundle loses without its code.
   */
  modules: Array<{ module: string; minified: number; gzipMarginal: number }>;
}

const gzipped = (code: string | Uint8Array) => gzipSync(code, { level: 9 }).byteLength;
const moduleName = (file: string) => file.replace(/^packages\/idempotency\/src\//, '').replace(/\.ts$/, '');

/**
 * What the gzipped bundle loses without each module: the bundle is built once more with whitespace kept, where
 * esbuild marks where each module's code starts (`// path`); each module's parts are cut out, the rest is
 * minified and gzipped. The same production build (`process.env.NODE_ENV` is "production" when minifying).
 */
async function gzipMarginals(options: BuildOptions): Promise<Map<string, number>> {
  const output = await build({
    ...options,
    minify: false,
    minifySyntax: true,
    minifyIdentifiers: true,
    define: { 'process.env.NODE_ENV': '"production"' },
  });
  // The entry's export statement names every module's exports: cut, so that any module can be left out.
  const text = (output.outputFiles?.[0]?.text ?? '').replace(/^export \{[\s\S]*?\};\s*$/m, '');
  const parts = text.split(/^(?=\/\/ .+\.ts$)/m);
  const minified = async (code: string) => (await transform(code, { minifyWhitespace: true })).code;
  const whole = gzipped(await minified(text));
  const owners = new Set(parts.map((part) => /^\/\/ (.+)\.ts$/m.exec(part)?.[1]).filter((name) => name));
  const marginals = new Map<string, number>();
  for (const owner of owners) {
    const rest = parts.filter((part) => !part.startsWith(`// ${owner}.ts\n`)).join('');
    marginals.set(moduleName(`${owner}.ts`), whole - gzipped(await minified(rest)));
  }
  return marginals;
}

const results: EntrySize[] = [];
for (const [entry, contents] of Object.entries(entries)) {
  const options = {
    // Resolved as the checkout resolves them; module paths in the metafile relative to the repository.
    stdin: { contents, resolveDir: path.join(repoRoot, 'apps/web'), loader: 'ts' },
    absWorkingDir: repoRoot,
    bundle: true,
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
  } satisfies BuildOptions;
  const output = await build({ ...options, minify: true });
  const code = output.outputFiles[0]?.contents ?? new Uint8Array();
  const inputs = Object.values(output.metafile.outputs)[0]?.inputs ?? {};
  const marginals = await gzipMarginals(options);
  const modules = Object.entries(inputs)
    .filter(([, input]) => input.bytesInOutput > 0)
    .map(([file, input]) => ({
      module: moduleName(file),
      minified: input.bytesInOutput,
      gzipMarginal: marginals.get(moduleName(file)) ?? 0,
    }))
    .sort((a, b) => b.gzipMarginal - a.gzipMarginal);
  results.push({ entry, minified: code.byteLength, gzipped: gzipped(code), modules });
}

const kB = (bytes: number) => (bytes / 1024).toFixed(2);
if (process.argv.includes('--json')) {
  console.log(JSON.stringify(results, null, 2));
} else {
  for (const { entry, minified, gzipped, modules } of results) {
    console.log(`${entry}: ${kB(minified)} kB min, ${kB(gzipped)} kB min+gz`);
    for (const { module, minified: bytes, gzipMarginal } of modules) {
      console.log(
        `  ${module.padEnd(34)} ${String(bytes).padStart(6)} B min ${String(gzipMarginal).padStart(6)} B gz marginal`,
      );
    }
  }
}
