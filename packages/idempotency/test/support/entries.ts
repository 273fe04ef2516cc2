/**
 * The package's entries as its manifest declares them: each code subpath of `exports`, the built file it loads
 * (`./dist/<entry>.js`, with `./dist/<entry>.d.ts` for types) and the TypeScript source that file is built from
 * (`src/<entry>.ts`: tsconfig.build.json's rootDir and outDir). The workspace, the tarball and vitest's alias
 * (vitest.config.ts) all go through the same `exports`.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

export const packageDir = path.resolve(import.meta.dirname, '..', '..');

export type ExportTarget = string | Record<string, string>;

export interface Manifest {
  name: string;
  exports: Record<string, ExportTarget>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  repository?: { type?: string; url?: string; directory?: string };
}

export interface Entry {
  /** `.`, `./client`, … */
  subpath: string;
  /** `@idem/idempotency`, `@idem/idempotency/client`, … */
  specifier: string;
  /** The `types` and `default` targets, relative to the package (`./dist/…`). */
  types: string;
  default: string;
  /** Absolute path of the source file `default` is built from. */
  source: string;
}

export function readManifest(dir = packageDir): Manifest {
  return JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as Manifest;
}

/** Every code subpath of `manifest` (not `./package.json`), in the manifest's order. */
export function entriesOf(manifest: Manifest): Entry[] {
  return Object.entries(manifest.exports)
    .filter(([subpath]) => subpath !== './package.json')
    .map(([subpath, target]) => {
      if (typeof target === 'string')
        throw new Error(`${subpath}: a bare target (${target}); each subpath needs types and default`);
      const { types, default: file } = target;
      const entry = /^\.\/dist\/(.+)\.js$/.exec(file ?? '')?.[1];
      if (!types || !file || !entry) throw new Error(`${subpath}: no ./dist/*.js default (${file})`);
      return {
        subpath,
        specifier: subpath === '.' ? manifest.name : `${manifest.name}/${subpath.slice(2)}`,
        types,
        default: file,
        source: path.join(packageDir, 'src', `${entry}.ts`),
      };
    });
}
