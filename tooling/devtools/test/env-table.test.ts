/** The README-table check itself: it finds the table, reads what a zod parser reads, and sees drift both ways. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { environmentDrift, environmentTableNames, variablesReadBy } from '../src/env-table.ts';

function readme(text: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'env-table-')), 'README.md');
  writeFileSync(file, text);
  return file;
}

const schema = z.object({
  DATABASE_URL: z.string(),
  PORT: z.coerce.number().default(4000),
  DEBUG: z.enum(['0', '1']).optional(),
});
const parse = (source: Record<string, string | undefined>) => schema.parse(source);

const table = (...names: string[]) =>
  readme(
    [
      '# app',
      '| variable | x |',
      '|---|---|',
      '| `NOT_THIS` | a table before the heading is not the one |',
      '',
      '## Environment',
      '',
      '| variable | default | meaning |',
      '|---|---|---|',
      ...names.map((name) => `| \`${name}\` | — | … |`),
      '',
      '| variable | effect |',
      '|---|---|',
      '| `LATER_TABLE` | not part of it |',
    ].join('\n'),
  );

describe('environmentTableNames', () => {
  it('reads the first variable table under the Environment heading', () => {
    expect(environmentTableNames(table('DATABASE_URL', 'PORT'))).toEqual(['DATABASE_URL', 'PORT']);
  });

  it('refuses a README without the heading, without the table, or with a row it cannot read', () => {
    expect(() => environmentTableNames(readme('# app\n'))).toThrow(/no "Environment" heading/);
    expect(() => environmentTableNames(readme('## Environment\n\ntext\n'))).toThrow(
      /no "\| variable \|" table/,
    );
    expect(() =>
      environmentTableNames(readme('## Environment\n| variable | d |\n|---|---|\n| PORT | 1 |\n')),
    ).toThrow(/row without/);
  });
});

describe('variablesReadBy', () => {
  it('lists every key of a zod schema, required, defaulted and optional, even though the parse fails', () => {
    expect(variablesReadBy(parse).sort()).toEqual(['DATABASE_URL', 'DEBUG', 'PORT']);
  });
});

describe('environmentDrift', () => {
  it('is empty when the table and the schema agree', () => {
    const names = environmentTableNames(table('PORT', 'DEBUG', 'DATABASE_URL'));
    expect(environmentDrift(names, variablesReadBy(parse))).toEqual({ undocumented: [], unknown: [] });
  });

  it('control: a variable missing from the table, and a documented one nobody reads, are both reported', () => {
    const names = environmentTableNames(table('DATABASE_URL', 'PORT', 'OLD_SETTING'));
    expect(environmentDrift(names, variablesReadBy(parse))).toEqual({
      undocumented: ['DEBUG'],
      unknown: ['OLD_SETTING'],
    });
  });
});
