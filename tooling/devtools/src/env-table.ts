/**
 * Keeps each app's README environment table and its env schema in step: the names in the table's first column
 * against the variables the app's env parser actually reads.
 */
import { readFileSync } from 'node:fs';

/**
 * The variable names of the README's environment table: the first table under a heading containing
 * "Environment" (case-insensitive) whose header's first cell is `variable`; each row's first cell holds one
 * `NAME` in backticks.
 */
export function environmentTableNames(readmePath: string): string[] {
  const lines = readFileSync(readmePath, 'utf8').split('\n');
  const heading = lines.findIndex((line) => /^#+ .*environment/i.test(line));
  if (heading === -1) throw new Error(`${readmePath}: no "Environment" heading`);
  const header = lines.findIndex((line, index) => index > heading && /^\|\s*variable\s*\|/i.test(line));
  if (header === -1) throw new Error(`${readmePath}: no "| variable |" table under the Environment heading`);
  const names: string[] = [];
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith('|')) break;
    const cell = line.split('|')[1]?.trim() ?? '';
    const name = /^`([A-Z][A-Z0-9_]*)`$/.exec(cell)?.[1];
    if (name === undefined) throw new Error(`${readmePath}: row without a single \`NAME\` first: ${line}`);
    names.push(name);
  }
  return names;
}

/**
 * Every variable `parse` reads from the environment it is given, in the order it reads them. The source is a
 * recording proxy with nothing set, so defaults and "required" errors both count as reads; a throwing parser
 * (a required variable missing) is expected and ignored.
 */
export function variablesReadBy(parse: (source: Record<string, string | undefined>) => unknown): string[] {
  const read = new Set<string>();
  const source = new Proxy<Record<string, string | undefined>>(
    {},
    {
      get(target, property) {
        if (typeof property === 'string') read.add(property);
        return Reflect.get(target, property);
      },
      has(target, property) {
        if (typeof property === 'string') read.add(property);
        return Reflect.has(target, property);
      },
    },
  );
  try {
    parse(source);
  } catch {
    // Parsing an empty environment fails on its required variables; what was read up to there is the answer.
  }
  // Object.prototype members that a parser may touch while inspecting its input are not variables.
  return [...read].filter((name) => /^[A-Z][A-Z0-9_]*$/.test(name));
}

export interface EnvironmentDrift {
  /** Read by the schema, missing from the table. */
  undocumented: string[];
  /** In the table, never read by the schema. */
  unknown: string[];
}

export function environmentDrift(
  tableNames: readonly string[],
  schemaNames: readonly string[],
): EnvironmentDrift {
  const table = new Set(tableNames);
  const schema = new Set(schemaNames);
  return {
    undocumented: [...schema].filter((name) => !table.has(name)).sort(),
    unknown: [...table].filter((name) => !schema.has(name)).sort(),
  };
}
