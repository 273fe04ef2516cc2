/**
 * createIdempotencyKey (client/key.ts): a fresh UUID v4 per intent, in a secure context (crypto.randomUUID) and
 * in an insecure one — a page served over http:// from a LAN address has crypto.getRandomValues only.
 */
import { webcrypto } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createIdempotencyKey } from '../src/client/index.ts';

/** RFC 4122 version 4: version nibble 4, variant nibble 8, 9, a or b; lowercase hex. */
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The crypto of an insecure context: getRandomValues (the real one), no randomUUID. */
function stubInsecureContextCrypto() {
  const getRandomValues = vi.fn((array: Uint8Array) => webcrypto.getRandomValues(array));
  vi.stubGlobal('crypto', { getRandomValues });
  return getRandomValues;
}

afterEach(() => {
  vi.unstubAllGlobals();
});

describe('createIdempotencyKey', () => {
  // In a secure context the platform's own UUID is the key: the fallback is for where it does not exist.
  it('uses crypto.randomUUID when the page has it', () => {
    const getRandomValues = vi.fn();
    vi.stubGlobal('crypto', { randomUUID: () => '0b7c7a4e-3f7a-4c1e-9d3b-2a8f6e5d4c3b', getRandomValues });
    expect(createIdempotencyKey()).toBe('0b7c7a4e-3f7a-4c1e-9d3b-2a8f6e5d4c3b');
    expect(getRandomValues).not.toHaveBeenCalled();
  });

  it('control: with the real crypto it gives a UUID v4', () => {
    expect(createIdempotencyKey()).toMatch(UUID_V4);
  });

  // The app served over http:// on a LAN address (a phone testing a dev server): randomUUID is missing there,
  // and the checkout must still get a valid key — the server takes it as a UUID, and reuses nothing.
  it('without crypto.randomUUID (an insecure context) still gives an RFC 4122 v4 UUID, from getRandomValues', () => {
    const getRandomValues = stubInsecureContextCrypto();
    const key = createIdempotencyKey();
    expect(key).toMatch(UUID_V4);
    expect(getRandomValues).toHaveBeenCalledTimes(1);
  });

  // Two intents must never share a key (the second would get the first one's stored result), so the 122 random
  // bits must all be random: every random digit takes all 16 values, the variant digit all four of 8–b.
  it('without crypto.randomUUID: keys are distinct, and every random digit is spread over all its values', () => {
    stubInsecureContextCrypto();
    const keys = Array.from({ length: 2000 }, () => createIdempotencyKey());

    expect(new Set(keys).size).toBe(keys.length);
    for (const key of keys) expect(key).toMatch(UUID_V4);
    const digitsAt = (position: number) => new Set(keys.map((key) => key[position]));
    const template = '10000000-1000-4000-8000-100000000000';
    for (let position = 0; position < template.length; position++) {
      const digit = template[position];
      if (digit === '0' || digit === '1') expect(digitsAt(position).size, `position ${position}`).toBe(16);
    }
    expect([...digitsAt(template.indexOf('8'))].sort()).toEqual(['8', '9', 'a', 'b']);
    expect(digitsAt(template.indexOf('4'))).toEqual(new Set(['4']));
  });
});
