/**
 * draft-ietf-httpapi-idempotency-key-header-07 §2.7: an error response should point at documentation of the
 * error. With `problemDocsUrl`, every idempotency problem of the plain-HTTP adapters carries
 * `Link: <problemDocsUrl#<code>>; rel="describedby"` (issue 29); without it (the CONTROL, the default), none.
 */
import type { Database } from '@idem/db';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createFetchIdempotency } from '../src/fetch/index.ts';
import { IdempotencyErrorCode } from '../src/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { connectWithOwnTable, uniqueScope } from './support/db.ts';

let db: Database;
beforeAll(async () => {
  db = await connectWithOwnTable(2);
});
afterAll(async () => {
  await db.$disconnect();
});

const DOCS = 'https://api.example.com/docs/idempotency';

function routeWith(problemDocsUrl?: string) {
  return createFetchIdempotency({
    store: createPrismaIdempotencyStore(db),
    getScope: (request) => request.headers.get('x-principal'),
    ...(problemDocsUrl === undefined ? {} : { problemDocsUrl }),
  }).external(async () => Response.json({ ok: true }, { status: 201 }));
}

const post = (scope: string, key: string | null, body: string) =>
  new Request('http://app.test/orders', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-principal': scope,
      ...(key === null ? {} : { 'idempotency-key': key }),
    },
    body,
  });

it('each idempotency problem points at its documentation; a success, a replay and a 401 do not', async () => {
  const route = routeWith(DOCS);
  const scope = uniqueScope();
  const missing = await route(post(scope, null, '{}'));
  expect(missing.status).toBe(400);
  expect(missing.headers.get('link')).toBe(`<${DOCS}#${IdempotencyErrorCode.missingKey}>; rel="describedby"`);

  const first = await route(post(scope, 'k-link', '{"a":1}'));
  expect(first.headers.get('link')).toBeNull();
  const replay = await route(post(scope, 'k-link', '{"a":1}'));
  expect(replay.headers.get('idempotent-replayed')).toBe('true');
  expect(replay.headers.get('link')).toBeNull();

  const reused = await route(post(scope, 'k-link', '{"a":2}'));
  expect(reused.status).toBe(422);
  expect(reused.headers.get('link')).toBe(`<${DOCS}#${IdempotencyErrorCode.keyReused}>; rel="describedby"`);
  expect((await reused.json()) as { type: string }).toMatchObject({
    type: 'urn:idem:problem:idempotency_key_reused',
  });

  const anonymous = await routeWith(DOCS)(
    new Request('http://app.test/orders', { method: 'POST', headers: { 'idempotency-key': 'k' } }),
  );
  expect(anonymous.status).toBe(401);
  expect(anonymous.headers.get('link')).toBeNull();
});

it('CONTROL (no problemDocsUrl, the default): the same problems carry no Link', async () => {
  const missing = await routeWith()(post(uniqueScope(), null, '{}'));
  expect(missing.status).toBe(400);
  expect(missing.headers.get('link')).toBeNull();
});

it('a problemDocsUrl that is not an absolute http(s) URL without a fragment is a setup error', () => {
  for (const bad of ['/docs', 'ftp://x.test/d', `${DOCS}#errors`, 'https://x.test/a>b', 'not a url'])
    expect(() => routeWith(bad), bad).toThrow(/problemDocsUrl/);
});
