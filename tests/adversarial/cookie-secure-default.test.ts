/**
 * Issue 12, item 9c (confirmed): COOKIE_SECURE defaulted to false in production, so the guest session cookie
 * (the principal every order and key belongs to) was also sent over plain HTTP, readable on the wire. The
 * production default is now `Secure`; development keeps it off (http://localhost), and `COOKIE_SECURE=false`
 * still opts out explicitly. Chromium keeps Secure cookies on http://localhost and http://127.0.0.1
 * (checked), so `pnpm start` works with the default (tests/adversarial/production-stack.spec.ts checks out
 * in Chromium on the production stack).
 *
 * Control: the same production environment parsed with the rules outside production (the old default).
 */
import { describe, expect, it } from 'vitest';
import { parseServerEnv } from '../../apps/web/src/env.ts';
import { productionSecrets, startProductionServer } from './support/production-server.ts';

const DATABASE_URL = process.env.DATABASE_URL ?? '';

function guestCookie(response: Response): string {
  const cookie = response.headers.getSetCookie().find((value) => value.startsWith('idem_session='));
  if (!cookie) throw new Error(`no session cookie in ${JSON.stringify(response.headers.getSetCookie())}`);
  return cookie;
}

describe('the session cookie in production', () => {
  const production = { NODE_ENV: 'production', DATABASE_URL, ...productionSecrets() };

  it('control: without the production rule the default is not Secure', () => {
    const env = parseServerEnv(production, { production: false });
    console.log(`[9c control] COOKIE_SECURE default outside the production rule: ${env.COOKIE_SECURE}`);
    expect(env.COOKIE_SECURE).toBe(false);
  });

  it('protected: production defaults to Secure; an explicit false is honoured; a typo is refused', () => {
    expect(parseServerEnv(production).COOKIE_SECURE).toBe(true);
    expect(parseServerEnv({ ...production, COOKIE_SECURE: 'false' }).COOKIE_SECURE).toBe(false);
    expect(() => parseServerEnv({ ...production, COOKIE_SECURE: 'yes' })).toThrow(
      /COOKIE_SECURE must be true or false/,
    );
    expect(parseServerEnv({ DATABASE_URL }, { production: false }).COOKIE_SECURE).toBe(false);
  });

  it('protected: next start sets the guest cookie with Secure (HttpOnly, SameSite=Lax)', async () => {
    const server = await startProductionServer(production);
    try {
      const cookie = guestCookie(await fetch(`${server.url}/`, { redirect: 'manual' }));
      console.log(`[9c protected] next start: ${cookie.replace(/=[^;]+/, '=…')}`);
      expect(cookie).toMatch(/; Secure/i);
      expect(cookie).toMatch(/; HttpOnly/i);
      expect(cookie).toMatch(/; SameSite=lax/i);
    } finally {
      await server.stop();
    }
  }, 90_000);
});
