/**
 * `pnpm build` of the library: `tsc -p tsconfig.build.json` into a fresh directory beside `dist/`, the
 * declaration rewrite there (scripts/rewrite-declaration-imports.mjs), then each new or changed file moved into
 * `dist/` by one rename, and the files no longer built removed. The apps of the workspace, the processes the
 * tests start and the packers all read `dist/`, and a test rebuilds it while others run: no reader ever finds it
 * missing or a file half-written, only each file whole, old or new. The staging directory sits at the same depth
 * as `dist/`, so the source maps' relative paths are the ones `dist/` needs.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, unlinkSync } from 'node:fs';
import path from 'node:path';

const packageDir = path.resolve(import.meta.dirname, '..');
const distDir = path.join(packageDir, 'dist');
const stagingDir = path.join(packageDir, `dist.build-${process.pid}`);

function run(args) {
  const result = spawnSync(process.execPath, args, { cwd: packageDir, stdio: 'inherit' });
  if (result.status !== 0) {
    rmSync(stagingDir, { recursive: true, force: true });
    process.exit(result.status ?? 1);
  }
}

/** Every file under `dir`, relative to it. */
function filesUnder(dir) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)));
}

function sameBytes(a, b) {
  try {
    return statSync(b).size === statSync(a).size && readFileSync(a).equals(readFileSync(b));
  } catch {
    return false;
  }
}

rmSync(stagingDir, { recursive: true, force: true });
run([
  path.join(packageDir, 'node_modules/typescript/bin/tsc'),
  '-p',
  'tsconfig.build.json',
  '--outDir',
  stagingDir,
]);
run([path.join(import.meta.dirname, 'rewrite-declaration-imports.mjs'), stagingDir]);

const built = filesUnder(stagingDir);
let moved = 0;
for (const file of built) {
  const target = path.join(distDir, file);
  if (sameBytes(path.join(stagingDir, file), target)) continue;
  mkdirSync(path.dirname(target), { recursive: true });
  renameSync(path.join(stagingDir, file), target);
  moved += 1;
}
const keep = new Set(built);
let removed = 0;
for (const file of filesUnder(distDir)) {
  if (keep.has(file)) continue;
  unlinkSync(path.join(distDir, file));
  removed += 1;
}
// Directories left empty by removed files.
for (const entry of readdirSync(distDir, { recursive: true, withFileTypes: true }).reverse()) {
  const dir = path.join(entry.parentPath, entry.name);
  if (entry.isDirectory() && readdirSync(dir).length === 0) rmSync(dir, { recursive: true });
}
rmSync(stagingDir, { recursive: true, force: true });
console.log(`build: ${built.length} files in dist/ (${moved} written, ${removed} removed)`);
