import { describe, expect, it } from 'vitest';
import { EnvError, parseEnv } from '../src/env.ts';

const URL = 'postgresql://postgres@127.0.0.1:5432/idem';

describe('parseEnv', () => {
  it('applies the defaults', () => {
    expect(parseEnv({ DATABASE_URL: URL })).toEqual({
      port: 4000,
      host: '127.0.0.1',
      databaseUrl: URL,
      secretKey: 'sk_test_idem',
      testKnobs: false,
      webhookUrl: undefined,
      webhookSecret: 'whsec_test_idem',
    });
  });

  it('reads every variable, and treats empty ones as unset', () => {
    expect(
      parseEnv({
        DATABASE_URL: URL,
        PORT: '0',
        HOST: '0.0.0.0',
        PROVIDER_SECRET_KEY: 'sk_x',
        PROVIDER_TEST_KNOBS: '1',
        PROVIDER_WEBHOOK_URL: 'http://127.0.0.1:3000/api/webhooks/provider',
        PROVIDER_WEBHOOK_SECRET: 'whsec_x',
      }),
    ).toEqual({
      port: 0,
      host: '0.0.0.0',
      databaseUrl: URL,
      secretKey: 'sk_x',
      testKnobs: true,
      webhookUrl: 'http://127.0.0.1:3000/api/webhooks/provider',
      webhookSecret: 'whsec_x',
    });
    expect(parseEnv({ DATABASE_URL: URL, PORT: '', HOST: '', PROVIDER_TEST_KNOBS: '' })).toMatchObject({
      port: 4000,
      host: '127.0.0.1',
      testKnobs: false,
    });
    expect(parseEnv({ DATABASE_URL: URL, PROVIDER_TEST_KNOBS: '0' }).testKnobs).toBe(false);
  });

  it.each([
    [{}, /DATABASE_URL is required/],
    [{ DATABASE_URL: '' }, /DATABASE_URL is required/],
    [{ DATABASE_URL: 'mysql://x' }, /DATABASE_URL must start with postgres/],
    [{ DATABASE_URL: URL, PORT: '65536' }, /PORT must be <= 65535/],
    [{ DATABASE_URL: URL, PORT: '-1' }, /PORT must be an integer/],
    [{ DATABASE_URL: URL, PORT: '80abc' }, /PORT must be an integer/],
    [{ DATABASE_URL: URL, PROVIDER_TEST_KNOBS: 'yes' }, /PROVIDER_TEST_KNOBS must be 1 or 0/],
    [
      { DATABASE_URL: URL, PROVIDER_WEBHOOK_URL: 'localhost:3000/hook' },
      /PROVIDER_WEBHOOK_URL must be an http/,
    ],
    [
      { DATABASE_URL: URL, PROVIDER_WEBHOOK_URL: 'ftp://example.com/' },
      /PROVIDER_WEBHOOK_URL must be an http/,
    ],
  ])('rejects %j with a one-line message', (env, message) => {
    expect(() => parseEnv(env)).toThrow(EnvError);
    expect(() => parseEnv(env)).toThrow(message);
  });

  it('reports every problem at once', () => {
    expect(() => parseEnv({ PORT: 'x' })).toThrow(/PORT must be an integer.*; DATABASE_URL is required/);
  });

  describe('NODE_ENV=production', () => {
    const production = { NODE_ENV: 'production', DATABASE_URL: URL };
    const strong = {
      PROVIDER_SECRET_KEY: 'sk_'.padEnd(40, 'k'),
      PROVIDER_WEBHOOK_SECRET: 'whsec_'.padEnd(40, 'w'),
    };

    it('takes secrets of its own', () => {
      expect(parseEnv({ ...production, ...strong })).toMatchObject({
        secretKey: strong.PROVIDER_SECRET_KEY,
        webhookSecret: strong.PROVIDER_WEBHOOK_SECRET,
      });
    });

    it.each([
      [
        { PROVIDER_WEBHOOK_SECRET: 'whsec_'.padEnd(40, 'w') },
        /PROVIDER_SECRET_KEY is required in production/,
      ],
      [
        { PROVIDER_SECRET_KEY: '', PROVIDER_WEBHOOK_SECRET: 'whsec_'.padEnd(40, 'w') },
        /PROVIDER_SECRET_KEY is required/,
      ],
      [{ ...strong, PROVIDER_SECRET_KEY: 'sk_test_idem' }, /PROVIDER_SECRET_KEY is the public demo value/],
      [
        { ...strong, PROVIDER_WEBHOOK_SECRET: 'whsec_test_idem' },
        /PROVIDER_WEBHOOK_SECRET is the public demo value/,
      ],
      [
        { ...strong, PROVIDER_WEBHOOK_SECRET: 'whsec_x' },
        /PROVIDER_WEBHOOK_SECRET must be at least 32 characters/,
      ],
    ])('refuses %j', (secrets, message) => {
      expect(() => parseEnv({ ...production, ...secrets })).toThrow(EnvError);
      expect(() => parseEnv({ ...production, ...secrets })).toThrow(message);
    });
  });
});
