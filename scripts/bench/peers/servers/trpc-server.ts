/**
 * `@trpc/server`, loaded from the copy `@idem/idempotency` itself resolves (packages/idempotency/node_modules).
 *
 * Why not a plain `import '@trpc/server'`: the repository root does not depend on @trpc/server (only the
 * workspace packages do), so the bare specifier resolves neither at run time nor for `tsc -p tsconfig.json`
 * from scripts/. Loading the very file Idem's middleware loads also guarantees ONE tRPC module instance. Drop
 * this file for plain imports once the root package.json lists `"@trpc/server": "catalog:"`.
 */
import { readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as TrpcStandalone from '../../../../packages/idempotency/node_modules/@trpc/server/dist/adapters/standalone.d.mts';
import type * as TrpcServer from '../../../../packages/idempotency/node_modules/@trpc/server/dist/index.d.mts';
import { repoRoot } from '../../../lib/migrate.ts';

interface ExportConditions {
  import?: { default?: string } | string;
}

const packageDir = realpathSync(path.join(repoRoot, 'packages/idempotency/node_modules/@trpc/server'));
const packageJson = JSON.parse(readFileSync(path.join(packageDir, 'package.json'), 'utf8')) as {
  exports: Record<string, ExportConditions>;
};

/** The ESM entry of one of the package's subpaths, as Node's resolver would pick it for `import`. */
function entryUrl(subpath: '.' | './adapters/standalone'): string {
  const conditions = packageJson.exports[subpath]?.import;
  const file = typeof conditions === 'string' ? conditions : conditions?.default;
  if (!file) throw new Error(`@trpc/server has no ESM entry for ${subpath}`);
  return pathToFileURL(path.join(packageDir, file)).href;
}

export const trpc = (await import(entryUrl('.'))) as typeof TrpcServer;
export const trpcStandalone = (await import(entryUrl('./adapters/standalone'))) as typeof TrpcStandalone;
