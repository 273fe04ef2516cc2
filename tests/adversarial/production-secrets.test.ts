/**
 * Issue 12, item 3a: in production the web app and the provider silently fell back to the public demo secrets
 * (`sk_test_idem`, `whsec_test_idem`), so anyone who read this repository could sign a webhook the server
 * accepted. Now a production process with a demo secret, or none, refuses to start with one line, and
 * `pnpm start` (scripts/lib/secrets.ts) generates its own into the data directory, the same for both processes.
 *
 * Control: the same production environment parsed with the rules outside production (what production got
 * before) takes the demo values, and a webhook an attacker signs with the public secret verifies.
 */
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EnvError as ProviderEnvError, parseEnv as parseProviderEnv } from '../../apps/provider/src/env.ts';
import { EnvError, parseServerEnv } from '../../apps/web/src/env.ts';
import { verifySignature } from '../../apps/web/src/server/webhooks/signature.ts';
import { STACK_SECRETS, stackSecrets } from '../../scripts/lib/secrets.ts';
import { freePort } from '../setup/free-port.ts';
import { nextStart, providerMain, startProductionServer } from './support/production-server.ts';

const DATABASE_URL = process.env.DATABASE_URL ?? '';
const SESSION_SECRET = 'a-session-secret-of-at-least-32-characters';
const IDEM_RESPONSE_SECRET = 'a-response-secret-of-at-least-32-characters';
const productionEnv = { NODE_ENV: 'production', DATABASE_URL, SESSION_SECRET, IDEM_RESPONSE_SECRET };
const DEMO = { PROVIDER_SECRET_KEY: 'sk_test_idem', PROVIDER_WEBHOOK_SECRET: 'whsec_test_idem' };
const strongProviderSecrets = {
  PROVIDER_SECRET_KEY: 'sk_'.padEnd(40, 'k'),
  PROVIDER_WEBHOOK_SECRET: 'whsec_'.padEnd(40, 'w'),
};

const dataDirs: string[] = [];
afterAll(() => {
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
});

function forgedSignature(body: string, secret: string): string {
  const timestamp = Math.floor(Date.now() / 1000);
  return `t=${timestamp},v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

describe('the public demo secrets in production', () => {
  it('control: parsed without the production rules, they are taken and a forged webhook verifies', () => {
    const web = parseServerEnv(productionEnv, { production: false });
    const provider = parseProviderEnv(productionEnv, { production: false });
    expect([web.PROVIDER_SECRET_KEY, web.PROVIDER_WEBHOOK_SECRET]).toEqual([
      DEMO.PROVIDER_SECRET_KEY,
      DEMO.PROVIDER_WEBHOOK_SECRET,
    ]);
    expect([provider.secretKey, provider.webhookSecret]).toEqual([
      DEMO.PROVIDER_SECRET_KEY,
      DEMO.PROVIDER_WEBHOOK_SECRET,
    ]);
    const body = JSON.stringify({ id: 'evt_forged', type: 'charge.succeeded' });
    const check = verifySignature(
      forgedSignature(body, 'whsec_test_idem'),
      body,
      web.PROVIDER_WEBHOOK_SECRET,
    );
    console.log(`[3a control] demo secrets taken in production; forged signature ok=${check.ok}`);
    expect(check.ok).toBe(true);
  });

  it('protected: both parsers refuse a missing, demo or short secret in production, one line naming it', () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [
        {},
        /PROVIDER_SECRET_KEY is required in production.*PROVIDER_WEBHOOK_SECRET is required in production/,
      ],
      [
        DEMO,
        /PROVIDER_SECRET_KEY is the public demo value.*PROVIDER_WEBHOOK_SECRET is the public demo value/,
      ],
      [
        { PROVIDER_SECRET_KEY: 'sk_short', PROVIDER_WEBHOOK_SECRET: 'whsec_short' },
        /PROVIDER_SECRET_KEY must be at least 32 characters.*PROVIDER_WEBHOOK_SECRET must be at least 32/,
      ],
    ];
    for (const [secrets, message] of cases) {
      const source = { ...productionEnv, ...secrets };
      expect(() => parseServerEnv(source)).toThrow(EnvError);
      expect(() => parseServerEnv(source)).toThrow(message);
      expect(() => parseProviderEnv(source)).toThrow(ProviderEnvError);
      expect(() => parseProviderEnv(source)).toThrow(message);
      for (const parse of [() => parseServerEnv(source), () => parseProviderEnv(source)]) {
        try {
          parse();
        } catch (error) {
          expect((error as Error).message).not.toContain('\n');
        }
      }
    }
    // The development session secret is just as public.
    expect(() =>
      parseServerEnv({
        ...productionEnv,
        ...strongProviderSecrets,
        SESSION_SECRET: 'idem-dev-session-secret-not-for-production-0001',
      }),
    ).toThrow(/SESSION_SECRET is the public demo value/);
    // So is the development key of the stored responses, and production has no default for it.
    expect(() =>
      parseServerEnv({
        ...productionEnv,
        ...strongProviderSecrets,
        IDEM_RESPONSE_SECRET: 'idem-dev-response-secret-not-for-production-01',
      }),
    ).toThrow(/IDEM_RESPONSE_SECRET is the public demo value/);
    expect(() =>
      parseServerEnv({ ...productionEnv, ...strongProviderSecrets, IDEM_RESPONSE_SECRET: undefined }),
    ).toThrow(/IDEM_RESPONSE_SECRET is required in production/);
    // Development and tests keep the defaults.
    expect(parseServerEnv({ DATABASE_URL }, { production: false }).PROVIDER_WEBHOOK_SECRET).toBe(
      'whsec_test_idem',
    );
  });

  it('protected: next start and the provider exit 1 with one line instead of serving', async () => {
    const web = nextStart(await freePort(), { ...productionEnv, ...DEMO });
    const provider = providerMain({ ...productionEnv, PORT: '0' });
    expect(await web.exited).toBe(1);
    expect(await provider.exited).toBe(1);
    const webLines = web.stderr().trim().split('\n');
    console.log(`[3a protected] next start: exit 1, "${webLines.at(-1)}"`);
    expect(webLines.at(-1)).toMatch(
      /^web: invalid environment: PROVIDER_SECRET_KEY is the public demo value/,
    );
    expect(provider.stderr().trim()).toMatch(
      /^provider: invalid environment: PROVIDER_SECRET_KEY is required in production[^\n]*$/,
    );
  }, 90_000);
});

describe('the stack runner generates the secrets', () => {
  it('pnpm start: generated once into the data directory (owner-only), reused, accepted by both apps', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'idem-secrets-'));
    dataDirs.push(dataDir);
    const first = stackSecrets('start', dataDir, {});
    expect(Object.keys(first).sort()).toEqual(Object.keys(STACK_SECRETS).sort());
    for (const { file } of Object.values(STACK_SECRETS))
      expect(statSync(path.join(dataDir, file)).mode & 0o777).toBe(0o600);
    expect(first.PROVIDER_SECRET_KEY).not.toBe(DEMO.PROVIDER_SECRET_KEY);
    expect(first.PROVIDER_WEBHOOK_SECRET).not.toBe(DEMO.PROVIDER_WEBHOOK_SECRET);
    expect(stackSecrets('start', dataDir, {})).toEqual(first); // a restart keeps sessions and agreement
    writeFileSync(path.join(dataDir, STACK_SECRETS.METRICS_TOKEN.file), ''); // an interrupted write
    expect(stackSecrets('start', dataDir, {}).METRICS_TOKEN).toMatch(/^idem_metrics_.{43}$/);
    expect(stackSecrets('start', dataDir, { PROVIDER_SECRET_KEY: 'sk_mine' }).PROVIDER_SECRET_KEY).toBe(
      'sk_mine',
    );
    expect(stackSecrets('dev', dataDir, {})).toEqual({});
    expect(stackSecrets('e2e', dataDir, {}).PROVIDER_SECRET_KEY).not.toBe(first.PROVIDER_SECRET_KEY);

    const source = { NODE_ENV: 'production', DATABASE_URL, ...first };
    const web = parseServerEnv(source);
    const provider = parseProviderEnv(source);
    expect(web.PROVIDER_SECRET_KEY).toBe(provider.secretKey);
    expect(web.PROVIDER_WEBHOOK_SECRET).toBe(provider.webhookSecret);

    // A real production server starts with them.
    const server = await startProductionServer(source as Record<string, string>);
    try {
      const health = await fetch(`${server.url}/api/health`);
      console.log(`[3a stack] next start with the generated secrets: /api/health ${health.status}`);
      expect(health.status).toBe(200);
    } finally {
      await server.stop();
    }
  }, 90_000);
});
