/**
 * The public surface, read from each subpath's entry (re-exports followed to their declarations): no two different exports
 * share a name (one name, one meaning, whichever subpath it is imported from), and the README's "Public
 * surface" lists exactly what each subpath exports — a new export is a decision written down there.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { entriesOf, packageDir, readManifest } from './support/entries.ts';

const manifest = readManifest();
/** [subpath, the entry's source file]. */
const entries = entriesOf(manifest).map((entry) => [entry.subpath, entry.source] as const);

/** `export { a, type B as C } from './x.ts'` statements of a module: [exported name, local name, from]. */
function reExportsOf(file: string): Array<[string, string, string]> {
  const text = readFileSync(file, 'utf8');
  const found: Array<[string, string, string]> = [];
  for (const match of text.matchAll(/export\s+(?:type\s+)?\{([^}]*)\}\s+from\s+'([^']+)'/g)) {
    const [, list = '', from = ''] = match;
    for (const item of list.split(',').map((part) => part.trim().replace(/^type\s+/, ''))) {
      if (!item) continue;
      const [local = '', exported = local] = item.split(/\s+as\s+/);
      found.push([exported, local, path.resolve(path.dirname(file), from)]);
    }
  }
  return found;
}

/** Where `name` is declared, following re-exports: `file#name` of its declaration. */
function declarationOf(file: string, name: string, depth = 0): string {
  const text = readFileSync(file, 'utf8');
  const declared = new RegExp(
    `export\\s+(?:declare\\s+)?(?:abstract\\s+)?(?:const|let|function|async function|class|interface|type|enum)\\s+${name}\\b`,
  );
  if (declared.test(text)) return `${path.relative(packageDir, file)}#${name}`;
  const next = reExportsOf(file).find(([exported]) => exported === name);
  if (!next || depth > 5) throw new Error(`${path.relative(packageDir, file)}: cannot find ${name}`);
  return declarationOf(next[2], next[1], depth + 1);
}

/**
 * Each subpath's exported names, each with the declaration it resolves to. The entries hold only
 * `export { … } from` statements (checked: anything else there fails this test).
 */
function exportsBySubpath(): Map<string, Map<string, string>> {
  const result = new Map<string, Map<string, string>>();
  for (const [subpath, file] of entries) {
    const stray = readFileSync(file, 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/export\s+(?:type\s+)?\{[^}]*\}\s+from\s+'[^']+';/g, '')
      .trim();
    if (stray !== '')
      throw new Error(`${subpath}: the entry may only re-export, found: ${stray.slice(0, 80)}`);
    const names = new Map<string, string>();
    for (const [exported, local, from] of reExportsOf(file)) names.set(exported, declarationOf(from, local));
    result.set(subpath, names);
  }
  return result;
}

/** The README's "Public surface" tables: subpath → the backticked names of each row's first cell. */
function readmeSurface(): Map<string, string[]> {
  const readme = readFileSync(path.join(packageDir, 'README.md'), 'utf8');
  const start = readme.indexOf('\n## Public surface');
  if (start < 0) throw new Error('README: no "## Public surface" section');
  const section = readme.slice(start + 1, readme.indexOf('\n## ', start + 1));
  const tables = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const line of section.split('\n')) {
    const heading = /^### `(@idem\/idempotency[^`]*)`/.exec(line);
    if (heading?.[1]) {
      current = [];
      tables.set(heading[1].replace(manifest.name, '.').replace(/^\.\//, './'), current);
      continue;
    }
    const cell = /^\| ([^|]+) \|/.exec(line)?.[1];
    if (!current || !cell || /^-+$/.test(cell.trim()) || cell.trim() === 'export') continue;
    for (const name of cell.matchAll(/`([A-Za-z_$][\w$]*)`/g)) if (name[1]) current.push(name[1]);
  }
  return tables;
}

describe('the public surface', () => {
  const surface = exportsBySubpath();

  it('gives one meaning to each name: an exported name is the same declaration in every subpath', () => {
    const meaning = new Map<string, Set<string>>();
    for (const names of surface.values())
      for (const [name, where] of names) meaning.set(name, (meaning.get(name) ?? new Set()).add(where));
    const clashes = [...meaning].filter(([, places]) => places.size > 1).map(([name]) => name);
    expect(clashes).toEqual([]);
  });

  it('is listed in the README, one table per subpath, exactly', () => {
    const listed = readmeSurface();
    const toKey = (subpath: string) => (subpath === '.' ? '.' : subpath.replace(/^\.\//, './'));
    expect([...listed.keys()].sort()).toEqual(entries.map(([subpath]) => toKey(subpath)).sort());
    for (const [subpath, names] of surface) {
      expect({ subpath, names: [...(listed.get(toKey(subpath)) ?? [])].sort() }).toEqual({
        subpath,
        names: [...names.keys()].sort(),
      });
    }
  });

  it('keeps the core small: no error factories, only the error class and its codes', () => {
    const core = [...(surface.get('.')?.keys() ?? [])];
    expect(core.filter((name) => /^[a-z]\w*Error$/.test(name))).toEqual([]);
  });
});
