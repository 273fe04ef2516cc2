/** The README's environment table names exactly the variables src/env.ts reads (production rules or not). */
import { fileURLToPath } from 'node:url';
import { environmentDrift, environmentTableNames, variablesReadBy } from '@idem/devtools/env-table';
import { expect, it } from 'vitest';
import { parseServerEnv } from '~/env';

it('README.md documents every variable of the env schema, and no other', () => {
  const table = environmentTableNames(fileURLToPath(new URL('../README.md', import.meta.url)));
  const schema = [
    ...variablesReadBy((source) => parseServerEnv(source, { production: false })),
    ...variablesReadBy((source) => parseServerEnv(source, { production: true })),
    ...variablesReadBy((source) => parseServerEnv(source)),
  ];
  expect(schema).toContain('DATABASE_URL');
  expect(environmentDrift(table, schema)).toEqual({ undocumented: [], unknown: [] });
});
