/**
 * Issue 27, item 3: under a database restart the provider crashed on an 'error' event of a checked-out pg client
 * (`read ECONNRESET`) that nobody listened to. pg-pool listens only while a client is idle; the provider's
 * withClient listens while it is lent. Each case runs in a child process, since the failure is the process dying.
 *
 * CONTROL: the same lost connection on a client borrowed with pool.connect() alone — the process dies.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

const fixture = path.join(import.meta.dirname, 'fixtures/connection-lost.ts');
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

function run(mode: 'guarded' | 'raw') {
  return spawnSync(process.execPath, ['--import', 'tsx', fixture, db.url, mode], {
    encoding: 'utf8',
    timeout: 60_000,
  });
}

describe('a connection lost while its client is checked out', () => {
  it('protected: the provider process survives and its pool answers again', () => {
    const result = run('guarded');
    expect(result.stderr).not.toContain('terminating connection');
    expect({ status: result.status, stdout: result.stdout.trim() }).toEqual({
      status: 0,
      stdout: 'pool answers after the lost connection',
    });
  });

  it('CONTROL: borrowed with pool.connect() alone, the unheard error kills the process', () => {
    const result = run('raw');
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain('terminating connection due to administrator command');
    expect(result.stdout).not.toContain('pool answers');
  });
});
