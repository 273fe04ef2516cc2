/**
 * Issue 12, item 1 (the configuration half) — key lifetimes form a checked chain: browser intent < server key
 * retention <= provider key retention. Before, the browser kept an unresolved intent forever and both keys lived
 * 24 h, so a late retry always outlived the records that would have replayed it (its consequence, the second
 * charge, is late-retry-second-charge.test.ts). Now a configuration that breaks the chain stops the server.
 */
import { describe, expect, it } from 'vitest';
import { EnvError, parseServerEnv } from '~/env';
import { keyLifetimeProblems } from '~/server/key-lifetimes';
import { freePort } from '../setup/free-port.ts';
import { nextStart, productionSecrets } from './support/production-server.ts';

const DATABASE_URL = 'postgresql://postgres@127.0.0.1:5432/none';

describe('the key-lifetime chain', () => {
  it('CONTROL: the old lifetimes (intent kept forever, both keys 24 h) break it twice', () => {
    const old = {
      browserIntentHours: Number.POSITIVE_INFINITY,
      serverRetentionHours: 24,
      providerRetentionHours: 24,
    };
    expect(keyLifetimeProblems(old)).toHaveLength(1);
    expect(keyLifetimeProblems(old)[0]).toMatch(/must be shorter than the server's key retention \(24 h\)/);
    expect(keyLifetimeProblems({ ...old, browserIntentHours: 48, serverRetentionHours: 72 })).toEqual([
      expect.stringMatching(/must not exceed the provider's \(PROVIDER_KEY_RETENTION_HOURS, 24 h\)/),
    ]);
  });

  it('protected: the defaults hold it (48 h < 72 h <= 72 h), and each broken link is refused by name', () => {
    expect(parseServerEnv({ DATABASE_URL }, { production: false }).keyLifetimes).toEqual({
      browserIntentHours: 48,
      serverRetentionHours: 72,
      providerRetentionHours: 72,
    });
    expect(() =>
      parseServerEnv({ DATABASE_URL, IDEM_INTENT_MAX_AGE_HOURS: '96' }, { production: false }),
    ).toThrow(/IDEM_INTENT_MAX_AGE_HOURS, 96 h\) must be shorter than the server's key retention \(72 h\)/);
    // A provider that forgets keys after 24 h (Stripe's retention) cannot back a 72 h server key.
    expect(() =>
      parseServerEnv({ DATABASE_URL, PROVIDER_KEY_RETENTION_HOURS: '24' }, { production: false }),
    ).toThrow(EnvError);
    expect(() =>
      parseServerEnv(
        {
          DATABASE_URL,
          PROVIDER_KEY_RETENTION_HOURS: '24',
          IDEM_CHECKOUT_KEY_RETENTION_HOURS: '24',
          IDEM_INTENT_MAX_AGE_HOURS: '12',
        },
        { production: false },
      ),
    ).not.toThrow();
  });

  it('protected: next start with a broken chain exits 1 with one line instead of serving', async () => {
    const web = nextStart(await freePort(), {
      DATABASE_URL,
      ...productionSecrets(),
      PROVIDER_KEY_RETENTION_HOURS: '24',
    });
    expect(await web.exited).toBe(1);
    expect(web.stderr().trim().split('\n').at(-1)).toMatch(
      /^web: invalid environment: .*must not exceed the provider's \(PROVIDER_KEY_RETENTION_HOURS, 24 h\)/,
    );
  }, 90_000);
});
