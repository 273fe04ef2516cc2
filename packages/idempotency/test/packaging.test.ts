/**
 * The package as another app gets it: built, packed, extracted into a scratch consumer, then checked from the
 * outside — files, publint, types under `nodenext` and `bundler`, and plain Node loading every runtime subpath
 * without TypeScript. The manifest is packed as it is written: `exports` at `dist` (types, then the ESM file)
 * and dependencies at literal versions, nothing a packer has to rewrite, so `npm pack` gives the same package as
 * `pnpm pack` (the same files byte for byte, the same manifest for all a consumer reads), which npm installs and
 * plain Node loads. In this workspace the apps load the same `dist` (`turbo run build` builds it first); vitest
 * alone maps the subpaths to the source (vitest.config.ts).
 */
import { execFile } from 'node:child_process';
import { existsSync, globSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withBuildLock } from './support/build-lock.ts';
import { entriesOf, type Manifest, packageDir, readManifest } from './support/entries.ts';

const run = promisify(execFile);
const workspaceRoot = path.resolve(packageDir, '../..');
const fixtureDir = path.join(import.meta.dirname, 'fixtures', 'consumer');
const tscBin = path.join(packageDir, 'node_modules', 'typescript', 'bin', 'tsc');

const workspaceManifest = readManifest();
const entries = entriesOf(workspaceManifest);
/** `.`, `./client`, …: every code subpath (not `./package.json`). */
const subpaths = entries.map((entry) => entry.subpath);

/**
 * What a package manager or a runtime reads from an installed package's manifest. `devDependencies` is not
 * among them: npm and pnpm ignore a dependency's devDependencies, so the workspace's `catalog:` and
 * `workspace:` ones stay (the npm install below installs a tarball that holds them).
 */
const CONSUMER_FIELDS = [
  'name',
  'version',
  'type',
  'exports',
  'imports',
  'main',
  'module',
  'types',
  'bin',
  'files',
  'sideEffects',
  'engines',
  'os',
  'cpu',
  'dependencies',
  'optionalDependencies',
  'peerDependencies',
  'peerDependenciesMeta',
  'bundleDependencies',
];

/** The workspace catalog's version of `name` (pnpm-workspace.yaml). */
function catalogVersion(name: string): string {
  const workspace = readFileSync(path.join(workspaceRoot, 'pnpm-workspace.yaml'), 'utf8');
  const escaped = name.replace(/[/@.-]/g, (c) => `\\${c}`);
  const version = new RegExp(`^\\s+"?${escaped}"?:\\s*(\\S+)\\s*$`, 'm').exec(workspace)?.[1];
  if (!version) throw new Error(`no catalog version for ${name}`);
  return version;
}

/**
 * The peers each subpath may reach, transitively. Exact, so that a new import of a peer is a decision made
 * here (and in the README's table), not an accident. `./prisma` and `./sqlite` are structural: they import no
 * Prisma module, and the package declares `@prisma/client` only for the versions it is tested with. `./testing`
 * is not listed: it may use any declared peer.
 */
const expectedPeersBySubpath: Record<string, string[]> = {
  '.': [],
  './client': ['@trpc/client', '@trpc/server'],
  './react': ['@tanstack/react-query', 'react'],
  './trpc': ['@trpc/server'],
  './prisma': [],
  './sqlite': [],
  // The plain HTTP adapters import no framework at runtime: Express only for its types.
  './fetch': [],
  './express': [],
  './mariadb': [],
  './otel': ['@opentelemetry/api'],
  // A node-postgres Pool, structurally: the subpath imports no driver.
  './pg': [],
  // The broker adapters are structural too: written against amqplib's and @nats-io/jetstream's objects, which
  // the app passes in; nothing of either is imported.
  './consumer': [],
  './consumer/rabbitmq': [],
  './consumer/jetstream': [],
};
/** Browser bundles: no `node:*` module may be reachable from these. */
const browserSubpaths = ['./client', './react'];

/**
 * What the consumer fixture's node_modules holds besides the tarball: the peers and hard dependencies a real
 * install would add, linked from the workspace (`@idem/db` stands for the consumer's own generated Prisma
 * client; vitest for `expectTypeOf`).
 */
const linkedPackages = [
  '@idem/db',
  '@opentelemetry/api',
  '@prisma/client',
  '@tanstack/react-query',
  '@trpc/client',
  '@trpc/server',
  '@trpc/tanstack-react-query',
  '@types/express',
  '@types/node',
  '@types/react',
  'express',
  'react',
  'structured-headers',
  'superjson',
  'vitest',
  'zod',
];

let scratch: string;
let consumerDir: string;
let extractedDir: string;
let packed: Manifest;
/** The tarballs of the same build, packed by each packer. */
let pnpmTarball: string;
let npmTarball: string;
/** npm's tarball extracted into a consumer like the pnpm one (peers linked), for plain Node to load. */
let npmConsumerDir: string;
let npmExtractedDir: string;

function sourceEntryOf(subpath: string): string {
  const entry = entries.find((candidate) => candidate.subpath === subpath);
  if (!entry) throw new Error(`${subpath}: not an entry of the manifest`);
  return entry.source;
}

function distTargetsOf(subpath: string): Record<string, string> {
  const target = packed.exports[subpath];
  if (!target || typeof target === 'string')
    throw new Error(`${subpath}: the packed export needs conditions`);
  return target;
}

function packageDirOf(name: string): string {
  for (const base of [packageDir, workspaceRoot]) {
    const candidate = path.join(base, 'node_modules', name);
    if (existsSync(candidate)) return candidate;
  }
  throw new Error(`${name} is not installed in the workspace`);
}

/** Runs a command; resolves with its output either way, so a failure shows what the tool said. */
async function attempt(file: string, args: string[], cwd: string) {
  const env = { ...process.env };
  delete env.NODE_OPTIONS; // nothing of vitest's loader: the consumer's Node sees only JavaScript
  try {
    const { stdout, stderr } = await run(file, args, { cwd, env, maxBuffer: 16 * 1024 * 1024 });
    return { ok: true, stdout, output: `${stdout}${stderr}` };
  } catch (error) {
    const failure = error as { stdout?: string; stderr?: string; message: string };
    const output = `${failure.stdout ?? ''}${failure.stderr ?? ''}` || failure.message;
    return { ok: false, stdout: failure.stdout ?? '', output };
  }
}

/** Runs a command that must succeed; resolves with its stdout. */
async function mustRun(file: string, args: string[], cwd: string): Promise<string> {
  const result = await attempt(file, args, cwd);
  if (!result.ok) throw new Error(`${path.basename(file)} ${args.join(' ')} failed:\n${result.output}`);
  return result.stdout;
}

// Its bound only a hang reaches: the pack and the build wait for the other suites' build lock and, in CI, share
// the cores with pnpm test (run 31: past 60 s).
beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'idem-packaging-'));
  const npmDestination = path.join(scratch, 'npm-pack');
  await mkdir(npmDestination);
  const [pnpmOutput, npmOutput] = await withBuildLock(async () => {
    await mustRun('pnpm', ['run', 'build'], packageDir);
    // One packer after the other: both read the same dist.
    const pnpmJson = await mustRun('pnpm', ['pack', '--pack-destination', scratch, '--json'], packageDir);
    const npmJson = await mustRun(
      'npm',
      ['pack', '--pack-destination', npmDestination, '--json', '--ignore-scripts'],
      packageDir,
    );
    return [pnpmJson, npmJson];
  });
  pnpmTarball = (JSON.parse(pnpmOutput) as { filename: string }).filename;
  const [npmPacked] = JSON.parse(npmOutput) as Array<{ filename: string }>;
  if (!npmPacked) throw new Error(`npm pack printed no tarball:\n${npmOutput}`);
  npmTarball = path.join(npmDestination, npmPacked.filename);

  consumerDir = path.join(scratch, 'consumer');
  await cp(fixtureDir, consumerDir, { recursive: true });
  extractedDir = await extractInto(pnpmTarball, consumerDir);
  npmConsumerDir = path.join(scratch, 'npm-consumer');
  await cp(fixtureDir, npmConsumerDir, { recursive: true });
  npmExtractedDir = await extractInto(npmTarball, npmConsumerDir);
  packed = JSON.parse(readFileSync(path.join(extractedDir, 'package.json'), 'utf8')) as Manifest;
  await writeFile(path.join(consumerDir, 'src', 'readme-express.ts'), readmeExpressRecipe());
}, 240_000);

/**
 * The README's Express 5 recipe as a file of a plain Express project: the block verbatim, after declarations of
 * what the recipe says is the app's own (`db`, its Prisma client; `userIdOf`, its authentication).
 */
function readmeExpressRecipe(): string {
  const readme = readFileSync(path.join(packageDir, 'README.md'), 'utf8');
  const start = readme.indexOf('**Express 5**');
  const block = /```ts\n([\s\S]*?)```/.exec(readme.slice(start))?.[1];
  if (start < 0 || !block) throw new Error('README: no ts block after **Express 5**');
  return [
    "import type { PrismaClient } from '@idem/db';",
    'declare const db: PrismaClient;',
    'declare function userIdOf(authorization: string | undefined): string | null;',
    block,
  ].join('\n');
}

/**
 * Extracts `tarball` as `node_modules/@idem/idempotency` of `consumer`, beside links to the peers and hard
 * dependencies a real install would add (from the workspace). Resolves with the package's directory.
 */
async function extractInto(tarball: string, consumer: string): Promise<string> {
  const unpacked = await mkdtemp(path.join(scratch, 'unpacked-'));
  await mustRun('tar', ['-xzf', tarball, '-C', unpacked], unpacked);
  const target = path.join(consumer, 'node_modules', '@idem', 'idempotency');
  await mkdir(path.dirname(target), { recursive: true });
  await rename(path.join(unpacked, 'package'), target);
  for (const name of linkedPackages) {
    const link = path.join(consumer, 'node_modules', name);
    await mkdir(path.dirname(link), { recursive: true });
    await symlink(packageDirOf(name), link, 'dir');
  }
  return target;
}

afterAll(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

describe('the manifest, packed as it is written', () => {
  it('exports every subpath at dist (types, then the ESM file), in the workspace as in the tarball', () => {
    expect(subpaths).toEqual([
      '.',
      './client',
      './react',
      './trpc',
      './prisma',
      './sqlite',
      './mariadb',
      './testing',
      './fetch',
      './express',
      './otel',
      './pg',
      './consumer',
      './consumer/rabbitmq',
      './consumer/jetstream',
    ]);
    for (const subpath of subpaths) {
      const targets = workspaceManifest.exports[subpath];
      // `types` first (TypeScript takes the first matching condition), then the ESM file.
      expect(targets && typeof targets === 'object' ? Object.keys(targets) : targets, subpath).toEqual([
        'types',
        'default',
      ]);
      expect(entries.find((entry) => entry.subpath === subpath)?.types).toMatch(/^\.\/dist\/.+\.d\.ts$/);
    }
    // pnpm pack changes nothing a consumer reads: what is written is what ships.
    const written = workspaceManifest as unknown as Record<string, unknown>;
    const shipped = packed as unknown as Record<string, unknown>;
    for (const field of CONSUMER_FIELDS) expect(shipped[field], field).toEqual(written[field]);
  });

  it('names no workspace protocol where a consumer looks; each dependency at the catalog’s version', () => {
    const written = workspaceManifest as unknown as Record<string, unknown>;
    const protocols = JSON.stringify(CONSUMER_FIELDS.map((field) => written[field])).match(
      /"(?:catalog|workspace|link|file):[^"]*"/g,
    );
    expect(protocols).toBeNull();
    // The version the workspace tests with (pnpm-workspace.yaml's catalog), written out.
    const dependencies = Object.entries(workspaceManifest.dependencies ?? {});
    expect(dependencies.length).toBeGreaterThan(0);
    for (const [name, version] of dependencies) expect(version, name).toBe(catalogVersion(name));
  });

  it('in vitest, each subpath is the module of its source file (vitest.config.ts’s alias), not dist', async () => {
    for (const entry of entries) {
      const bySpecifier = (await import(/* @vite-ignore */ entry.specifier)) as object;
      const bySource = (await import(/* @vite-ignore */ entry.source)) as object;
      expect(bySpecifier, entry.specifier).toBe(bySource);
    }
  });
});

describe('the packed package', () => {
  it('(a) has every file its exports name, with declaration maps and source maps that resolve', () => {
    for (const subpath of subpaths) {
      for (const [condition, target] of Object.entries(distTargetsOf(subpath))) {
        const file = path.join(extractedDir, target);
        expect(existsSync(file), `${subpath} → ${condition}: ${target}`).toBe(true);
        const map = JSON.parse(readFileSync(`${file}.map`, 'utf8')) as { sources: string[] };
        for (const source of map.sources) {
          expect(existsSync(path.resolve(path.dirname(file), source)), `${target}.map → ${source}`).toBe(
            true,
          );
        }
      }
    }
  });

  it('(a) ships declarations that import .js, never the unpublished .ts', async () => {
    const declarations = (await readdir(path.join(extractedDir, 'dist'), { recursive: true })).filter(
      (file) => file.endsWith('.d.ts'),
    );
    expect(declarations.length).toBeGreaterThan(subpaths.length);
    const tsImports = declarations.filter((file) =>
      /(?:from|import)\s*\(?\s*['"]\.{1,2}\/[^'"]*\.ts['"]/.test(
        readFileSync(path.join(extractedDir, 'dist', file), 'utf8'),
      ),
    );
    expect(tsImports).toEqual([]);
  });

  it('(b) publint finds no errors and no warnings', async () => {
    const { messages, pkg } = await publint({ pkgDir: extractedDir, pack: false, level: 'warning' });
    expect(messages.map((message) => `${message.type}: ${formatMessage(message, pkg)}`)).toEqual([]);
  });

  it('declares tRPC, TanStack Query, React, Prisma, Express, OpenTelemetry and the broker clients as optional peers, never as dependencies', () => {
    const peers = Object.keys(packed.peerDependencies ?? {}).sort();
    expect(peers).toEqual([
      '@nats-io/jetstream',
      '@opentelemetry/api',
      '@prisma/client',
      '@tanstack/react-query',
      '@trpc/client',
      '@trpc/server',
      '@types/express',
      'amqplib',
      'express',
      'react',
    ]);
    for (const peer of peers) {
      expect(packed.peerDependenciesMeta?.[peer]?.optional, peer).toBe(true);
      expect(packed.dependencies?.[peer], peer).toBeUndefined();
    }
    expect(Object.keys(packed.dependencies ?? {}).sort()).toEqual(['structured-headers']);
  });

  it('reaches from each subpath only the peers it declares; the core reaches none, the browser half no node:*', async () => {
    const declared = new Set([
      ...Object.keys(packed.dependencies ?? {}),
      ...Object.keys(packed.peerDependencies ?? {}),
    ]);
    const peers = new Set(Object.keys(packed.peerDependencies ?? {}));
    const builtins = new Set(builtinModules);
    for (const subpath of subpaths) {
      const imported = await bareImportsOf(path.join(extractedDir, distTargetsOf(subpath).default ?? ''));
      const packages = [...new Set(imported.filter((name) => !isBuiltin(name, builtins)).map(packageNameOf))];
      expect(
        packages.filter((name) => !declared.has(name)),
        `${subpath} imports undeclared packages`,
      ).toEqual([]);
      const expectedPeers = expectedPeersBySubpath[subpath];
      if (expectedPeers) {
        expect(packages.filter((name) => peers.has(name)).sort(), `${subpath} peers`).toEqual(expectedPeers);
      }
      if (browserSubpaths.includes(subpath)) {
        expect(
          imported.filter((name) => isBuiltin(name, builtins)),
          `${subpath} is browser code`,
        ).toEqual([]);
      }
    }
  });

  it('(c) a consumer, and the README’s Express recipe, typecheck against the packed types with moduleResolution nodenext and bundler', async () => {
    const configs = ['tsconfig.nodenext.json', 'tsconfig.bundler.json'];
    const results = await Promise.all(
      configs.map((config) => attempt(process.execPath, [tscBin, '-p', config, '--listFiles'], consumerDir)),
    );
    for (const [index, result] of results.entries()) {
      const config = configs[index];
      const lines = result.output.split('\n');
      expect(
        lines.filter((line) => /error TS\d+/.test(line)),
        config,
      ).toEqual([]);
      expect(result.ok, config).toBe(true);
      // The package's types came from the tarball's dist, not from the workspace's source.
      const ours = lines.filter((file) => file.includes('@idem/idempotency/'));
      expect(ours.length, config).toBeGreaterThan(0);
      expect(ours.filter((file) => !/node_modules\/@idem\/idempotency\/dist\/.+\.d\.ts$/.test(file))).toEqual(
        [],
      );
      expect(result.output).not.toContain(path.join(packageDir, 'src'));
    }
  });

  it('(c) control: one wrong type assertion, and the Express recipe on `req.user`, fail to typecheck', async () => {
    const control = path.join(consumerDir, 'src', 'control.ts');
    await writeFile(
      control,
      [
        "import type { TransactionalProcedureContext } from '@idem/idempotency/trpc';",
        "import { expectTypeOf } from 'vitest';",
        'declare const context: TransactionalProcedureContext<{ order: object }>;',
        '// Wrong on purpose: tx is the transaction type, not a string.',
        'expectTypeOf(context.tx).toEqualTypeOf<string>();',
        '',
      ].join('\n'),
    );
    // The recipe as it was: plain Express 5 declares no `req.user`.
    const recipe = readmeExpressRecipe();
    const onUser = recipe.replace(/getScope: \(req\) => .*$/m, 'getScope: (req) => req.user?.id,');
    expect(onUser).not.toBe(recipe);
    const expressControl = path.join(consumerDir, 'src', 'control-express.ts');
    await writeFile(expressControl, onUser);
    try {
      const result = await attempt(process.execPath, [tscBin, '-p', 'tsconfig.nodenext.json'], consumerDir);
      expect(result.ok).toBe(false);
      const errors = result.output.split('\n').filter((line) => /^src\//.test(line));
      expect(errors.filter((line) => line.startsWith('src/control.ts'))).not.toEqual([]);
      expect(errors.filter((line) => line.startsWith('src/control-express.ts'))).toEqual([
        expect.stringMatching(/error TS2339: Property 'user' does not exist on type 'Request/),
      ]);
      expect(errors.filter((line) => !/^src\/control(-express)?\.ts/.test(line))).toEqual([]);
    } finally {
      await rm(control);
      await rm(expressControl);
    }
  });

  it('(d) plain Node loads every runtime subpath from dist (require on Node ≥ 24, and import)', async () => {
    await expectEverySubpathLoads(consumerDir, extractedDir, packed);
  });
});

describe('npm pack, like pnpm pack', () => {
  it('packs the same package: the same files byte for byte, the same manifest for all a consumer reads', async () => {
    const pnpmFiles = await filesOf(extractedDir);
    const npmFiles = await filesOf(npmExtractedDir);
    expect(npmFiles).toEqual(pnpmFiles);
    const differing = pnpmFiles.filter(
      (file) =>
        file !== 'package.json' &&
        !readFileSync(path.join(extractedDir, file)).equals(readFileSync(path.join(npmExtractedDir, file))),
    );
    expect(differing).toEqual([]);

    const npmManifest = JSON.parse(
      readFileSync(path.join(npmExtractedDir, 'package.json'), 'utf8'),
    ) as Record<string, unknown>;
    const pnpmManifest = packed as unknown as Record<string, unknown>;
    for (const field of CONSUMER_FIELDS) expect(npmManifest[field], field).toEqual(pnpmManifest[field]);
    // No workspace-only protocol where a package manager or a runtime looks.
    const protocols = JSON.stringify(CONSUMER_FIELDS.map((field) => npmManifest[field])).match(
      /"(?:catalog|workspace):[^"]*"/g,
    );
    expect(protocols).toBeNull();
  });

  it('installs with npm (offline, beside its one dependency) and plain Node imports it', async () => {
    const app = path.join(scratch, 'npm-app');
    await mkdir(path.join(app, 'node_modules'), { recursive: true });
    // The hard dependencies as the registry would give them (copies: npm treats a symlink as a linked project
    // and would run its scripts), at the catalog's versions; offline, a range they do not satisfy fails the install.
    const dependencies = Object.keys(workspaceManifest.dependencies ?? {});
    for (const name of dependencies)
      await cp(realpathSync(packageDirOf(name)), path.join(app, 'node_modules', name), { recursive: true });
    await writeFile(
      path.join(app, 'package.json'),
      JSON.stringify({
        name: 'npm-app',
        private: true,
        type: 'module',
        dependencies: Object.fromEntries(dependencies.map((name) => [name, catalogVersion(name)])),
      }),
    );
    const install = await attempt(
      'npm',
      [
        'install',
        '--offline',
        '--no-audit',
        '--no-fund',
        '--ignore-scripts',
        '--no-package-lock',
        npmTarball,
      ],
      app,
    );
    expect(install.output.match(/npm error .*/g) ?? [], install.output).toEqual([]);
    expect(install.ok, install.output).toBe(true);
    const loaded = await attempt(
      process.execPath,
      [
        '--no-warnings',
        '--input-type=module',
        '-e',
        `const m = await import('${workspaceManifest.name}'); console.log(import.meta.resolve('${workspaceManifest.name}'), typeof m.parseIdempotencyKey);`,
      ],
      app,
    );
    expect(loaded.output.trim()).toBe(
      `file://${path.join(app, 'node_modules', workspaceManifest.name, 'dist', 'index.js')} function`,
    );
    // An npm install and a Node start: past the default 30 s on a loaded CI machine (load average 17).
  }, 120_000);

  it('plain Node loads every runtime subpath of the npm-packed package', async () => {
    const npmManifest = JSON.parse(
      readFileSync(path.join(npmExtractedDir, 'package.json'), 'utf8'),
    ) as Manifest;
    await expectEverySubpathLoads(npmConsumerDir, npmExtractedDir, npmManifest);
  });
});

describe('the README in the tarball', () => {
  it('points nowhere outside the package: relative paths resolve in the tarball, the rest is the repository’s URL', async () => {
    const readme = await readFile(path.join(extractedDir, 'README.md'), 'utf8');
    expect(readmeReferences(readme).links.length).toBeGreaterThan(0);
    expect(readmeLinkProblems(readme, extractedDir)).toEqual([]);
  });

  it('control: each way out of the package is told apart', () => {
    const repository = repositoryUrl(workspaceManifest);
    const markdown = [
      'Measured: [docs/BENCHMARKS.md](../../docs/BENCHMARKS.md); the entry `src/index.ts`, built to `dist/`.',
      'The tests: `test/newcomer.test.ts` and [`test/packaging.test.ts`], [gone](' +
        repository +
        '/blob/main/docs/GONE.md),',
      `[old branch](${repository}/blob/master/README.md), [a dir as a file](${repository}/blob/main/examples).`,
      '',
      '```sh',
      'cat test/newcomer.test.ts ../../README.md',
      '```',
      '',
      `[\`test/packaging.test.ts\`]: ${repository}/blob/main/packages/idempotency/test/packaging.test.ts`,
    ].join('\n');
    expect(readmeLinkProblems(markdown, extractedDir)).toEqual([
      '../../docs/BENCHMARKS.md: not in the tarball',
      `${repository}/blob/main/docs/GONE.md: no such file in the repository`,
      `${repository}/blob/master/README.md: not under ${repository}/blob/main/ or ${repository}/tree/main/`,
      `${repository}/blob/main/examples: no such file in the repository`,
      '`test/newcomer.test.ts`: a path of the repository, not in the tarball, and no link',
    ]);
  });
});

/**
 * What in `markdown` (a README packed in `tarball`) leads out of the package: a relative link to a file not in
 * the tarball; a link into the repository (package.json's `repository`) that is not on its main branch or names
 * no such file or directory in this checkout; a path in code (`test/x.test.ts`) that names a file of the
 * repository, is no link, and is not in the tarball either (`src/…` and `dist/` are).
 */
function readmeLinkProblems(markdown: string, tarball: string): string[] {
  const { links, unlinkedPaths } = readmeReferences(markdown);
  const repository = repositoryUrl(workspaceManifest);
  const problems: string[] = [];
  for (const url of links) {
    if (url.startsWith('#')) continue;
    if (!/^[a-z][a-z0-9+.-]*:/i.test(url)) {
      const target = path.resolve(tarball, decodeURIComponent(url.replace(/[#?].*$/, '')));
      const inside = !path.relative(tarball, target).startsWith('..');
      if (!inside || !existsSync(target)) problems.push(`${url}: not in the tarball`);
      continue;
    }
    if (!url.startsWith(`${repository}/`)) continue;
    const [, kind, target = ''] = /^\/(blob|tree)\/main\/([^#?]+)/.exec(url.slice(repository.length)) ?? [];
    const file = path.join(workspaceRoot, decodeURIComponent(target));
    if (!kind) problems.push(`${url}: not under ${repository}/blob/main/ or ${repository}/tree/main/`);
    else if (!existsSync(file) || statSync(file).isDirectory() !== (kind === 'tree'))
      problems.push(`${url}: no such ${kind === 'tree' ? 'directory' : 'file'} in the repository`);
  }
  for (const span of unlinkedPaths) {
    if (span in workspaceManifest.exports) continue; // `./prisma`: a subpath of the package, not a directory
    const inRepository = [packageDir, workspaceRoot].some((base) => globSync(span, { cwd: base }).length > 0);
    if (inRepository && globSync(span, { cwd: tarball }).length === 0)
      problems.push(`\`${span}\`: a path of the repository, not in the tarball, and no link`);
  }
  return problems;
}

/** `git+https://github.com/OWNER/idem.git` → `https://github.com/OWNER/idem`. */
function repositoryUrl(manifest: Manifest): string {
  const url = manifest.repository?.url?.replace(/^git\+/, '').replace(/\.git$/, '');
  if (!url?.startsWith('https://')) throw new Error(`package.json: no https repository URL (${url})`);
  return url;
}

/**
 * The README's link targets (inline `[text](url)`, and `[text][label]`, `[text][]` and `[text]` through their
 * `[label]: url` definitions), and the code spans outside any link text that look like relative paths
 * (`dir/file`, no spaces). Fenced code blocks are not prose: skipped.
 */
function readmeReferences(markdown: string): { links: string[]; unlinkedPaths: string[] } {
  const definitions = new Map<string, string>();
  const normalize = (label: string) => label.trim().replace(/\s+/g, ' ').toLowerCase();
  const prose = markdown
    .replace(/^```[\s\S]*?^```/gm, '')
    .replace(/^ {0,3}\[([^\]]+)\]:\s*(\S+).*$/gm, (_line, label: string, url: string) => {
      definitions.set(normalize(label), url);
      return '';
    });
  const links: string[] = [];
  const linkedText: Array<[number, number]> = [];
  const link = /\[((?:[^[\]]|\[[^\]]*\])*)\](?:\(([^)\s]*)(?:\s+"[^"]*")?\)|\[([^\]]*)\])?/g;
  for (const match of prose.matchAll(link)) {
    const [, text = '', inline, label] = match;
    const url =
      inline ?? definitions.get(normalize(label === undefined || label === '' ? text : label)) ?? undefined;
    if (url === undefined) continue;
    links.push(url);
    linkedText.push([match.index + 1, match.index + 1 + text.length]);
  }
  const unlinkedPaths = [...prose.matchAll(/`([^`\n]+)`/g)]
    .filter((match) => !linkedText.some(([from, to]) => match.index >= from && match.index < to))
    .map((match) => match[1] ?? '')
    .filter((span) => /^(?:\.{1,2}\/)?[\w.-]+\/[\w.*/-]*$/.test(span));
  return { links, unlinkedPaths: [...new Set(unlinkedPaths)] };
}

/** Every file under `dir`, relative, sorted. */
async function filesOf(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)))
    .sort();
}

/**
 * Plain Node, in `consumer`, requires then imports every subpath of the package extracted at `installed`: each
 * must load from the file the manifest's `default` condition names, with the source's runtime exports.
 */
async function expectEverySubpathLoads(
  consumer: string,
  installed: string,
  manifest: Manifest,
): Promise<void> {
  const specifiers = subpaths.map((subpath) =>
    subpath === '.' ? manifest.name : `${manifest.name}/${subpath.slice(2)}`,
  );
  // One Node process for every subpath (spawning is the slow part): require() first, so that it loads each
  // module itself through the `default` condition, then import().
  const script = `
    import { createRequire } from 'node:module';
    const require = createRequire(process.cwd() + '/');
    const results = [];
    for (const specifier of ${JSON.stringify(specifiers)}) {
      try {
        const required = Object.keys(require(specifier)).sort();
        const imported = Object.keys(await import(specifier)).sort();
        results.push({ specifier, file: import.meta.resolve(specifier), required, imported });
      } catch (error) {
        results.push({ specifier, error: String(error) });
      }
    }
    console.log(JSON.stringify(results));`;
  const stdout = await mustRun(
    process.execPath,
    ['--no-warnings', '--input-type=module', '-e', script],
    consumer,
  );
  const results = JSON.parse(stdout) as Array<{ file?: string; required?: string[]; imported?: string[] }>;
  for (const [index, subpath] of subpaths.entries()) {
    const result = results[index];
    const target = manifest.exports[subpath];
    const file = typeof target === 'string' ? target : (target?.default ?? '');
    expect(result, subpath).toEqual({
      specifier: specifiers[index],
      file: `file://${path.join(installed, file)}`,
      // The same runtime exports as the TypeScript source.
      required: Object.keys((await import(sourceEntryOf(subpath))) as object).sort(),
      imported: result?.required,
    });
  }
}

/** Every bare specifier (package or builtin) reachable through the entry's relative imports. */
async function bareImportsOf(entry: string): Promise<string[]> {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    metafile: true,
    format: 'esm',
    platform: 'node',
    packages: 'external',
    outdir: path.join(scratch, 'graph'),
    logLevel: 'silent',
  });
  const imports = Object.values(result.metafile.outputs).flatMap((output) => output.imports);
  return [...new Set(imports.filter((entry) => entry.external).map((entry) => entry.path))];
}

function isBuiltin(specifier: string, builtins: Set<string>): boolean {
  return specifier.startsWith('node:') || builtins.has(specifier);
}

/** `@scope/name/sub` → `@scope/name`; `name/sub` → `name`. */
function packageNameOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier);
}
