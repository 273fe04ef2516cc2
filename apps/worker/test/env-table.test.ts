/** The README's environment table names exactly the variables src/env.ts reads. */
import { fileURLToPath } from 'node:url';
import { environmentDrift, environmentTableNames, variablesReadBy } from '@idem/devtools/env-table';
import { expect, it } from 'vitest';
import { parseWorkerEnv } from '../src/env.ts';

it('README.md documents every variable of the env schema, and no other', () => {
  const table = environmentTableNames(fileURLToPath(new URL('../README.md', import.meta.url)));
  const schema = variablesReadBy((source) => parseWorkerEnv(source));
  expect(schema).toContain('DATABASE_URL');
  expect(environmentDrift(table, schema)).toEqual({ undocumented: [], unknown: [] });
});
