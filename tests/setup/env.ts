/** Runs in every test worker before the test files: point app code at this run's database. */
import { inject } from 'vitest';

process.env.DATABASE_URL = inject('databaseUrl');
