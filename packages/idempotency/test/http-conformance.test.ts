/**
 * The conformance kit (`./testing`, `protocol: 'http'`) against small real apps on the plain HTTP adapters —
 * Fetch (Hono on @hono/node-server) and Express 5 — in both modes, on the run's Postgres, with the route's
 * effect counted as committed rows. The control: the same route with no idempotency FAILS the kit.
 */
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ConformanceCheckId,
  type ConformanceReport,
  formatConformanceReport,
  runIdempotencyConformance,
} from '../src/testing/index.ts';
import { connectWithOwnTable } from './support/db.ts';
import { type Adapter, createOrdersTable, type StartedApp, startHttpApp } from './support/http-apps.ts';

let db: Database;
let table: string;
const started: StartedApp[] = [];
beforeAll(async () => {
  db = await connectWithOwnTable(16);
  table = await createOrdersTable(db);
});
afterAll(async () => {
  await Promise.all(started.map((app) => app.close()));
  await db.$disconnect();
});

async function start(
  ...args: Parameters<typeof startHttpApp> extends [unknown, unknown, ...infer Rest] ? Rest : never
) {
  const app = await startHttpApp(db, table, ...args);
  started.push(app);
  return app;
}

function resultOf(report: ConformanceReport, id: ConformanceCheckId) {
  const result = report.results.find((candidate) => candidate.id === id);
  if (!result) throw new Error(`${id} did not run:\n${formatConformanceReport(report)}`);
  return result;
}

describe.each(['fetch', 'express'] as const satisfies readonly Adapter[])('the %s adapter', (adapter) => {
  describe.each(['transactional', 'external'] as const)('%s mode', (mode) => {
    it('passes every check the kit has for a plain HTTP route', async () => {
      const { target } = await start(adapter, mode);
      const report = await runIdempotencyConformance(target, { concurrency: 12 });
      console.log(formatConformanceReport(report));
      expect(report.results.filter((result) => !result.passed)).toEqual([]);
      expect(report.passed).toBe(true);
      // Plain HTTP has no batches; transactional claims are invisible to the in-flight count (no 429).
      expect(report.notCovered.map((skipped) => skipped.id)).toEqual(
        mode === 'external' ? ['batched'] : ['batched', 'in-flight-cap'],
      );
      expect(report.results).toHaveLength(mode === 'external' ? 16 : 15);
    }, 90_000);
  });

  it('control: the same route without the adapter fails the kit (every duplicate runs)', async () => {
    const { target } = await start(adapter, 'transactional', { protected: false });
    const report = await runIdempotencyConformance(target, {
      only: ['concurrency', 'replay', 'fingerprint', 'missing-key', 'in-flight', 'stored-error'],
      concurrency: 12,
    });
    console.log(formatConformanceReport(report));
    expect(report.passed).toBe(false);
    expect(resultOf(report, 'concurrency')).toMatchObject({
      passed: false,
      detail: expect.stringMatching(/expected 1 execution, counted 12/),
    });
    expect(resultOf(report, 'fingerprint')).toMatchObject({
      passed: false,
      detail: expect.stringMatching(/expected HTTP 422, got 201/),
    });
    for (const id of ['replay', 'missing-key', 'in-flight', 'stored-error'] as const)
      expect(resultOf(report, id).passed).toBe(false);
  }, 90_000);
});
