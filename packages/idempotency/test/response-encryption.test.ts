/**
 * Stored responses private at rest (`encryptStoredResponses`): the key table holds no plaintext of a response,
 * replays stay byte-identical, a rotated secret still reads the old rows, an unknown key and a ciphertext moved
 * to another key's row are refused. CONTROL: the same requests through the plain store leave the plaintext in
 * the row.
 */
import type { Database } from '@idem/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  ENCRYPTED_BODY_PREFIX,
  encryptStoredResponses,
  IdempotencyStoreSetupError,
  type ResponseEncryptionOptions,
} from '../src/index.ts';
import { createPrismaIdempotencyStore } from '../src/prisma/index.ts';
import { connectWithOwnTable } from './support/db.ts';
import { createTestTRPC, freshIdentity, requestContext } from './support/trpc.ts';

const SECRET_A = 'a'.repeat(16) + 'first-response-secret-0001';
const SECRET_B = 'b'.repeat(16) + 'second-response-secret-002';
/** What the procedure answers: a customer's email, which must not sit in the table in clear. */
const EMAIL = 'customer-7f3a@example.com';

let db: Database;
beforeAll(async () => {
  db = await connectWithOwnTable();
});
afterAll(async () => {
  await db.$disconnect();
});

function router(encryption: ResponseEncryptionOptions | null) {
  const { t, idempotency } = createTestTRPC(db, undefined, {
    wrapStore: (store) => (encryption ? encryptStoredResponses(store, encryption) : store),
  });
  let runs = 0;
  const app = t.router({
    hold: t.procedure
      .concat(idempotency.external())
      .input(z.object({ amount: z.number() }))
      .mutation(({ input }) => {
        runs += 1;
        return { email: EMAIL, amount: input.amount, at: new Date('2026-12-04T00:00:00Z') };
      }),
  });
  return {
    call: (key: string, principal: string) => t.createCallerFactory(app)(requestContext(key, principal)).hold,
    runs: () => runs,
  };
}

async function rawResponse(scope: string, key: string): Promise<string> {
  const rows = await db.$queryRawUnsafe<Array<{ response: string }>>(
    'select response::text as response from idempotency_keys where scope = $1 and key = $2',
    scope,
    key,
  );
  return rows[0]?.response ?? '';
}

describe('encryptStoredResponses', () => {
  it('CONTROL: the plain store keeps the response in clear', async () => {
    const { principal, key } = freshIdentity();
    await router(null).call(key, principal)({ amount: 5 });
    expect(await rawResponse(principal, key)).toContain(EMAIL);
  });

  it('protected: the row holds ciphertext only, and the replay is the first answer', async () => {
    const app = router({ secrets: [SECRET_A] });
    const { principal, key } = freshIdentity();
    const first = await app.call(key, principal)({ amount: 5 });
    const replay = await app.call(key, principal)({ amount: 5 });
    expect(replay).toEqual(first);
    expect(app.runs()).toBe(1);
    const raw = await rawResponse(principal, key);
    expect(raw).toContain(ENCRYPTED_BODY_PREFIX);
    expect(raw).not.toContain(EMAIL);
    expect(raw).not.toContain('customer');
  });

  it('rotation: a new first secret writes with it and still reads rows of the old one; without it, refused', async () => {
    const old = freshIdentity();
    await router({ secrets: [SECRET_A] }).call(old.key, old.principal)({ amount: 1 });
    const rotated = router({ secrets: [SECRET_B, SECRET_A] });
    expect(await rotated.call(old.key, old.principal)({ amount: 1 })).toMatchObject({ email: EMAIL });
    expect(rotated.runs()).toBe(0);
    const fresh = freshIdentity();
    await rotated.call(fresh.key, fresh.principal)({ amount: 2 });
    const keyIdOf = async (who: { principal: string; key: string }) =>
      (await rawResponse(who.principal, who.key)).match(/idem-enc:v1:([^:]+):/)?.[1];
    expect(await keyIdOf(fresh)).not.toBe(await keyIdOf(old));

    const store = encryptStoredResponses(createPrismaIdempotencyStore(db), { secrets: [SECRET_B] });
    await expect(store.find({ scope: old.principal, procedure: 'hold', key: old.key })).rejects.toThrow(
      IdempotencyStoreSetupError,
    );
    expect(await store.find({ scope: fresh.principal, procedure: 'hold', key: fresh.key })).toMatchObject({
      state: 'completed',
    });
  });

  it("a ciphertext moved onto another key's row does not decrypt", async () => {
    const app = router({ secrets: [SECRET_A] });
    const a = freshIdentity();
    const b = freshIdentity();
    await app.call(a.key, a.principal)({ amount: 1 });
    await app.call(b.key, b.principal)({ amount: 2 });
    await db.$executeRawUnsafe(
      `update idempotency_keys set response = (select response from idempotency_keys where scope = $1 and key = $2)
       where scope = $3 and key = $4`,
      a.principal,
      a.key,
      b.principal,
      b.key,
    );
    const store = encryptStoredResponses(createPrismaIdempotencyStore(db), { secrets: [SECRET_A] });
    await expect(store.find({ scope: b.principal, procedure: 'hold', key: b.key })).rejects.toThrow();
  });

  it('refuses a short secret at setup', () => {
    expect(() =>
      encryptStoredResponses(createPrismaIdempotencyStore(db), { secrets: ['too short'] }),
    ).toThrow(IdempotencyStoreSetupError);
  });
});
