/**
 * The admin principal and the admin.* procedures, against the real database and a real payment provider:
 * who gets in (401 / 403 / 200 over real tRPC HTTP), the key browser's search, one key's trail, and evicting a
 * key — only a stuck one without confirmation, against the version the admin saw, with an audit row.
 */
import { randomUUID } from 'node:crypto';
import type { Database } from '@idem/db';
import { hashApiToken } from '@idem/db';
import { seedDatabase } from '@idem/dev-db/seed';
import { demoAdmin, demoUsers } from '@idem/dev-db/seed-data';
import { fingerprintRequest } from '@idem/idempotency';
import { startProvider } from '@idem/provider';
import { TRPCError } from '@trpc/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeKeyRef, encodeKeyRef, type KeyRef } from '~/lib/key-ref';

type App = {
  POST: (request: Request) => Promise<Response>;
  GET: (request: Request) => Promise<Response>;
  createCaller: typeof import('~/server/root').createCaller;
  createTRPCContext: typeof import('~/server/trpc').createTRPCContext;
  signAdminSession: typeof import('~/server/auth/admin-session').signAdminSession;
  signGuestSession: typeof import('~/server/auth/session').signGuestSession;
  checkAdminToken: typeof import('~/server/auth/admin-login').checkAdminToken;
  sessionSecret: string;
};

const [alice] = demoUsers;
let provider: Awaited<ReturnType<typeof startProvider>>;
let db: Database;
let app: App;

beforeAll(async () => {
  provider = await startProvider({ databaseUrl: process.env.DATABASE_URL ?? '', port: 0 });
  process.env.PROVIDER_URL = provider.url; // before the app's env is parsed (first app import below)
  ({ db } = await import('~/server/db'));
  await seedDatabase(db);
  const route = await import('~/app/api/trpc/[trpc]/route');
  app = {
    POST: route.POST,
    GET: route.GET,
    createCaller: (await import('~/server/root')).createCaller,
    createTRPCContext: (await import('~/server/trpc')).createTRPCContext,
    signAdminSession: (await import('~/server/auth/admin-session')).signAdminSession,
    signGuestSession: (await import('~/server/auth/session')).signGuestSession,
    checkAdminToken: (await import('~/server/auth/admin-login')).checkAdminToken,
    sessionSecret: (await import('~/env')).env.SESSION_SECRET,
  };
});
afterAll(async () => {
  await provider?.close();
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const asAdmin = () => caller(bearer(demoAdmin.token));
const asAlice = () => caller(bearer(alice?.token ?? ''));

function caller(headers: Record<string, string>) {
  return app.createCaller(() => app.createTRPCContext({ headers: new Headers(headers) }));
}

/** GET a query procedure over tRPC HTTP, like the dashboard does (no batching here). */
function httpQuery(path: string, headers: Record<string, string>, input?: unknown) {
  const search = input === undefined ? '' : `?input=${encodeURIComponent(JSON.stringify({ json: input }))}`;
  return app.GET(new Request(`http://localhost/api/trpc/${path}${search}`, { headers }));
}

async function placeOrder(key: string, token = alice?.token ?? '') {
  const response = await app.POST(
    new Request('http://localhost/api/trpc/checkout.placeOrder', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearer(token), 'idempotency-key': key },
      body: JSON.stringify({
        json: {
          items: [{ sku: 'NB-DOT-A5', quantity: 1 }],
          email: 'alice@example.com',
          cardToken: 'tok_visa',
        },
      }),
    }),
  );
  const body = (await response.json()) as { result?: { data: { json: { id: string } } } };
  return { status: response.status, orderId: body.result?.data.json.id };
}

async function trpcError(promise: Promise<unknown>, code: TRPCError['code']): Promise<TRPCError> {
  const error = await promise.then(
    () => null,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(TRPCError);
  expect((error as TRPCError).code).toBe(code);
  return error as TRPCError;
}

async function aliceScope(): Promise<string> {
  const user = await db.user.findUniqueOrThrow({ where: { email: alice?.email } });
  return `user:${user.id}`;
}

/** A row as the library writes it; `stuck` is processing with a lease that ended a minute ago. */
async function insertKey(kind: 'stuck' | 'live' | 'completed', ref: Partial<KeyRef> = {}): Promise<KeyRef> {
  const full: KeyRef = {
    scope: ref.scope ?? `guest:${randomUUID()}`,
    procedure: ref.procedure ?? 'test.admin',
    key: ref.key ?? randomUUID(),
  };
  await db.$executeRawUnsafe(
    `insert into idempotency_keys (scope, procedure, key, fingerprint, state, response, http_status, lease_owner,
       locked_until, created_at, expires_at)
     values ($1, $2, $3, repeat('f', 64), $4,
       case when $4 = 'completed' then '{"ok":true}' end, case when $4 = 'completed' then 200 end,
       case when $4 = 'completed' then null else gen_random_uuid() end,
       case $5 when 'stuck' then now() - interval '1 minute' when 'live' then now() + interval '1 minute' end,
       now() - interval '2 minutes', now() + interval '1 day')`,
    full.scope,
    full.procedure,
    full.key,
    kind === 'completed' ? 'completed' : 'processing',
    kind,
  );
  return full;
}

async function keyView(ref: KeyRef) {
  const trail = await asAdmin().admin.keyTrail({ ref });
  if (!trail.key) throw new Error('no such key');
  return trail.key;
}

const rowExists = async (ref: KeyRef) =>
  (await db.idempotencyKey.count({ where: { scope: ref.scope, procedure: ref.procedure, key: ref.key } })) ===
  1;

describe('who may use the admin procedures (tRPC over HTTP)', () => {
  it('no principal → 401; a guest or a customer → 403; a bad token → 401; the admin token → 200', async () => {
    const guestCookie = `idem_session=${await app.signGuestSession(randomUUID(), app.sessionSecret)}`;
    expect((await httpQuery('admin.overview', {})).status).toBe(401);
    expect((await httpQuery('admin.overview', { cookie: guestCookie })).status).toBe(403);
    expect((await httpQuery('admin.overview', bearer(alice?.token ?? ''))).status).toBe(403);
    expect((await httpQuery('admin.overview', bearer('idem_not_a_token'))).status).toBe(401);
    expect((await httpQuery('admin.overview', bearer(demoAdmin.token))).status).toBe(200);
    expect((await httpQuery('admin.searchKeys', bearer(alice?.token ?? ''), { query: '' })).status).toBe(403);
  });

  it('the admin browser session (cookie naming the API token) is an admin; forged or revoked ones are not', async () => {
    const token = `idem_test_admin_${randomUUID()}`;
    const user = await db.user.create({
      data: { email: `admin-${randomUUID()}@example.test`, name: 'Test admin', role: 'admin' },
    });
    const apiToken = await db.apiToken.create({
      data: { userId: user.id, label: 'test', tokenHash: hashApiToken(token) },
    });
    const session = await app.signAdminSession(apiToken.id, app.sessionSecret);
    expect((await httpQuery('admin.overview', { cookie: `idem_admin=${session}` })).status).toBe(200);

    // A guest session's JWT in the admin cookie: different key and audience → not an admin session.
    const guestJwt = await app.signGuestSession(apiToken.id, app.sessionSecret);
    expect((await httpQuery('admin.overview', { cookie: `idem_admin=${guestJwt}` })).status).toBe(401);
    // Signed with another secret.
    const forged = await app.signAdminSession(apiToken.id, 'x'.repeat(48));
    expect((await httpQuery('admin.overview', { cookie: `idem_admin=${forged}` })).status).toBe(401);

    // The role taken away, then the token deleted: the same cookie stops working at once.
    await db.user.update({ where: { id: user.id }, data: { role: 'customer' } });
    expect((await httpQuery('admin.overview', { cookie: `idem_admin=${session}` })).status).toBe(401);
    await db.user.update({ where: { id: user.id }, data: { role: 'admin' } });
    expect((await httpQuery('admin.overview', { cookie: `idem_admin=${session}` })).status).toBe(200);
    await db.apiToken.delete({ where: { id: apiToken.id } });
    expect((await httpQuery('admin.overview', { cookie: `idem_admin=${session}` })).status).toBe(401);
  });

  it('the sign-in check accepts an admin token only', async () => {
    expect(await app.checkAdminToken(db, ` ${demoAdmin.token} `)).toMatchObject({
      ok: true,
      email: demoAdmin.email,
    });
    expect(await app.checkAdminToken(db, alice?.token ?? '')).toEqual({
      ok: false,
      reason: 'not_admin',
      email: alice?.email,
    });
    expect(await app.checkAdminToken(db, 'idem_not_a_token')).toEqual({ ok: false, reason: 'unknown_token' });
    expect(await app.checkAdminToken(db, '')).toEqual({ ok: false, reason: 'unknown_token' });
  });
});

describe('the key browser', () => {
  it('finds a key by itself, by its order id, by its principal (id or email) and by the log key_hash', async () => {
    const key = randomUUID();
    const placed = await placeOrder(key);
    expect(placed.status).toBe(200);
    const scope = await aliceScope();
    const admin = asAdmin();
    const refOf = (found: { keys: Array<{ key: string; matchedBy: string }> }) =>
      found.keys.filter((candidate) => candidate.key === key).map((candidate) => candidate.matchedBy);

    expect(refOf(await admin.admin.searchKeys({ query: key }))).toEqual(['key']);
    expect(refOf(await admin.admin.searchKeys({ query: key.slice(0, 13) }))).toEqual(['key_prefix']);
    expect(refOf(await admin.admin.searchKeys({ query: placed.orderId ?? '' }))).toEqual(['order']);
    expect(refOf(await admin.admin.searchKeys({ query: scope }))).toEqual(['principal']);
    expect(refOf(await admin.admin.searchKeys({ query: alice?.email.toUpperCase() ?? '' }))).toEqual([
      'principal',
    ]);
    const keyHash = fingerprintRequest('key', [scope, key]).slice(0, 16);
    expect(refOf(await admin.admin.searchKeys({ query: keyHash }))).toEqual(['key_hash']);
    // Control: an unrelated order id finds nothing.
    expect((await admin.admin.searchKeys({ query: randomUUID() })).keys).toEqual([]);

    const [found] = (await admin.admin.searchKeys({ query: key })).keys;
    expect(found).toMatchObject({
      state: 'completed',
      status: 'completed',
      httpStatus: 200,
      replayCount: 0,
      keyHash,
    });
    expect(found?.fingerprint).toMatch(/^[0-9a-f]{64}$/);
  });

  it('computes the same key_hash as the library for keys with quotes and backslashes', async () => {
    const ref = await insertKey('completed', { key: `q"uote\\back/slash ${randomUUID()}` });
    const [found] = (await asAdmin().admin.searchKeys({ query: ref.key })).keys;
    expect(found?.keyHash).toBe(fingerprintRequest('key', [ref.scope, ref.key]).slice(0, 16));
    const byHash = await asAdmin().admin.searchKeys({ query: found?.keyHash ?? '' });
    expect(byHash.keys.map((candidate) => candidate.key)).toContain(ref.key);
  });

  it('lists stuck keys: processing with an ended lease, not live or completed ones', async () => {
    const stuck = await insertKey('stuck');
    const live = await insertKey('live');
    const done = await insertKey('completed');
    const listed = (await asAdmin().admin.stuckKeys()).map((key) => key.key);
    expect(listed).toContain(stuck.key);
    expect(listed).not.toContain(live.key);
    expect(listed).not.toContain(done.key);
  });
});

describe('one key trail', () => {
  it('goes from the key to its order, payment, provider charge and events', async () => {
    const key = randomUUID();
    const placed = await placeOrder(key);
    const scope = await aliceScope();
    const trail = await asAdmin().admin.keyTrail({ ref: { scope, procedure: 'checkout.placeOrder', key } });
    expect(trail.key?.status).toBe('completed');
    expect(trail.orderId).toBe(placed.orderId);
    expect(trail.order).toMatchObject({ id: placed.orderId, status: 'paid' });
    expect(trail.payment).toMatchObject({ status: 'succeeded' });
    expect(trail.provider).toMatchObject({ available: true, idempotencyKey: `order_${placed.orderId}` });
    expect(trail.provider?.charges).toHaveLength(1);
    expect(trail.provider?.charges[0]?.id).toBe(trail.payment?.providerChargeId);
    expect(trail.provider?.events.map((event) => event.type)).toEqual(['charge.succeeded']);
    // The fulfilment job the request wrote in its paying transaction (no worker runs on this database).
    expect(trail.jobs).toMatchObject({ available: true, items: [{ state: 'created', retryCount: 0 }] });

    // The provider's part comes through its API: every request the trail makes is a GET under /v1.
    const { getKeyTrail } = await import('~/server/admin/key-trail');
    const { createProviderReader } = await import('~/server/admin/provider-reader');
    const asked: string[] = [];
    const countingFetch: typeof fetch = (input, init) => {
      asked.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`);
      return fetch(input, init);
    };
    const ref = { scope, procedure: 'checkout.placeOrder', key };
    const viaApi = await getKeyTrail(db, ref, {
      provider: createProviderReader({
        baseUrl: provider.url,
        secretKey: 'sk_test_idem',
        fetch: countingFetch,
      }),
      fulfilmentJobs: async () => [],
    });
    expect(viaApi.provider).toEqual(trail.provider);
    expect(asked).toEqual(['GET /v1/charges', 'GET /v1/events']);

    // An unreachable provider or job queue is reported as such; the rest of the trail is still there.
    const unreachable = await getKeyTrail(db, ref, {
      provider: createProviderReader({ baseUrl: 'http://127.0.0.1:9', secretKey: 'sk_test_idem' }),
      fulfilmentJobs: () => Promise.reject(new Error('queue down')),
    });
    expect(unreachable.provider).toMatchObject({ available: false, charges: [], events: [] });
    expect(unreachable.jobs).toEqual({ available: false, items: [] });
    expect(unreachable.order).toMatchObject({ id: placed.orderId, status: 'paid' });

    // Another procedure's key has no order steps.
    const other = await insertKey('completed');
    const otherTrail = await asAdmin().admin.keyTrail({ ref: other });
    expect(otherTrail.orderId).toBeNull();
    expect(otherTrail.provider).toBeNull();
  });
});

describe('evicting a key', () => {
  it('a stuck key: evicted without confirmation, the row kept as it was in the audit log', async () => {
    const ref = await insertKey('stuck');
    const before = await keyView(ref);
    expect(before.status).toBe('stuck');
    const result = await asAdmin().admin.evictKey({ ref, version: before.version });
    expect(result).toMatchObject({ rule: 'lease_expired', previousState: 'processing' });
    expect(await rowExists(ref)).toBe(false);

    const audit = await db.adminAuditEvent.findUniqueOrThrow({ where: { id: result.auditId } });
    const adminUser = await db.user.findUniqueOrThrow({ where: { email: demoAdmin.email } });
    expect(audit).toMatchObject({
      actor: `user:${adminUser.id}`,
      actorEmail: demoAdmin.email,
      action: 'idempotency_key.evict',
      target: { scope: ref.scope, procedure: ref.procedure, key: ref.key },
      detail: { rule: 'lease_expired', state: 'processing' },
    });
    expect(audit.before).toMatchObject({
      scope: ref.scope,
      key: ref.key,
      state: 'processing',
      fingerprint: 'f'.repeat(64),
      leaseOwner: before.leaseOwner,
    });
    // The trail still shows the key's history after the row is gone.
    const trail = await asAdmin().admin.keyTrail({ ref });
    expect(trail.key).toBeNull();
    expect(trail.evictions.map((event) => event.rule)).toEqual(['lease_expired']);
    // Evicting again: the key is gone.
    await trpcError(asAdmin().admin.evictKey({ ref, version: before.version }), 'NOT_FOUND');
  });

  it('a completed or live key: refused without explicit confirmation (412), evicted with it', async () => {
    for (const kind of ['completed', 'live'] as const) {
      const ref = await insertKey(kind);
      const view = await keyView(ref);
      const error = await trpcError(
        asAdmin().admin.evictKey({ ref, version: view.version }),
        'PRECONDITION_FAILED',
      );
      expect(error.message).toMatch(/Confirm explicitly/);
      expect(await rowExists(ref)).toBe(true); // control: nothing deleted
      const result = await asAdmin().admin.evictKey({ ref, version: view.version, confirmNotStuck: true });
      expect(result.rule).toBe('confirmed');
      expect(await rowExists(ref)).toBe(false);
    }
  });

  it('refuses a key that changed since the admin looked (409), and anyone but an admin (403)', async () => {
    const ref = await insertKey('stuck');
    const seen = await keyView(ref);
    // A retry took the key over meanwhile: new lease owner, live lease.
    await db.$executeRawUnsafe(
      `update idempotency_keys set lease_owner = gen_random_uuid(), locked_until = now() + interval '30 seconds'
       where scope = $1 and procedure = $2 and key = $3`,
      ref.scope,
      ref.procedure,
      ref.key,
    );
    await trpcError(
      asAdmin().admin.evictKey({ ref, version: seen.version, confirmNotStuck: true }),
      'CONFLICT',
    );
    expect(await rowExists(ref)).toBe(true);

    const stuck = await insertKey('stuck');
    const view = await keyView(stuck);
    await trpcError(asAlice().admin.evictKey({ ref: stuck, version: view.version }), 'FORBIDDEN');
    await trpcError(caller({}).admin.evictKey({ ref: stuck, version: view.version }), 'UNAUTHORIZED');
    expect(await rowExists(stuck)).toBe(true);
  });

  it('after evicting a checkout key stuck past the charge, the retry resumes the same order: one charge', async () => {
    const key = randomUUID();
    const first = await placeOrder(key);
    expect(first.status).toBe(200);
    const ref = { scope: await aliceScope(), procedure: 'checkout.placeOrder', key };
    // The process died after the charge, before storing the answer: processing, lease ended.
    await db.$executeRawUnsafe(
      `update idempotency_keys set state = 'processing', response = null, http_status = null,
         lease_owner = gen_random_uuid(), locked_until = now() - interval '1 second'
       where scope = $1 and procedure = $2 and key = $3`,
      ref.scope,
      ref.procedure,
      ref.key,
    );
    const view = await keyView(ref);
    expect(view.status).toBe('stuck');
    await asAdmin().admin.evictKey({ ref, version: view.version });

    const retry = await placeOrder(key);
    expect(retry).toEqual({ status: 200, orderId: first.orderId });
    const charges = await fetch(`${provider.url}/v1/charges?order=${first.orderId}`, {
      headers: { authorization: 'Bearer sk_test_idem' },
    });
    expect(((await charges.json()) as { data: unknown[] }).data).toHaveLength(1);
    expect((await keyView(ref)).status).toBe('completed');
  });

  it('the trail page address round-trips the key', () => {
    const ref = { scope: 'guest:x', procedure: 'checkout.placeOrder', key: 'k"\\/ é' };
    expect(encodeKeyRef(ref)).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeKeyRef(encodeKeyRef(ref))).toEqual(ref);
    expect(decodeKeyRef('not-a-ref')).toBeNull();
    expect(decodeKeyRef(encodeKeyRef({ ...ref, key: '' }))).toBeNull();
  });
});
