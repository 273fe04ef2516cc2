/**
 * After `tsc -p tsconfig.build.json` (scripts/build.mjs runs it on its staging directory, the argument; default
 * `dist/`): rewrites relative `.ts` specifiers in the emitted declaration files to
 * `.js`. The sources import `./x.ts` and `rewriteRelativeImportExtensions` rewrites them in the emitted `.js`
 * only — tsc leaves `.d.ts` imports as written (microsoft/TypeScript#61037). TypeScript itself resolves
 * `./x.ts` inside a `.d.ts` to `./x.d.ts`, but other tools (IDEs, API extractors, type checkers of bundlers)
 * look for the named file, which is not published. `.ts` → `.js` keeps every column, so the declaration maps
 * stay exact.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const distDir = path.resolve(process.argv[2] ?? path.join(import.meta.dirname, '..', 'dist'));
// `from './x.ts'`, `import './x.ts'`, `import('./x.ts')` — relative specifiers only, never a package's name.
const relativeTsSpecifier = /((?:from|import)\s*\(?\s*)(['"])(\.{1,2}\/[^'"]*?)\.([mc]?)ts\2/g;

let rewritten = 0;
for (const entry of readdirSync(distDir, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile() || !/\.d\.[mc]?ts$/.test(entry.name)) continue;
  const file = path.join(entry.parentPath, entry.name);
  const before = readFileSync(file, 'utf8');
  const after = before.replace(
    relativeTsSpecifier,
    (_match, keyword, quote, specifier, flavour) => `${keyword}${quote}${specifier}.${flavour}js${quote}`,
  );
  if (after === before) continue;
  writeFileSync(file, after);
  rewritten += 1;
}
console.log(`rewrite-declaration-imports: ${rewritten} declaration files now import .js`);
