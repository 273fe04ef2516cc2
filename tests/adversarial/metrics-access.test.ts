/**
 * Issue 12, item 9b (confirmed): GET /api/metrics answered anyone — procedure names, outcome counts, keys in
 * flight, webhook and job counters of the shop's traffic. Now a production server requires
 * `Authorization: Bearer <METRICS_TOKEN>` (`pnpm start` generates one into .data/ and prints it) and, without a
 * token configured, keeps the endpoint closed (403); development stays open unless a token is set.
 *
 * Control: the route without the production rule (how every environment ran it) serves an anonymous scrape.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GET } from '~/app/api/metrics/route';
import { productionSecrets, startProductionServer } from './support/production-server.ts';

const DATABASE_URL = process.env.DATABASE_URL ?? '';
const METRICS_TOKEN = `idem_metrics_${randomBytes(32).toString('base64url')}`;
let withToken: Awaited<ReturnType<typeof startProductionServer>>;
let withoutToken: Awaited<ReturnType<typeof startProductionServer>>;

beforeAll(async () => {
  [withToken, withoutToken] = await Promise.all([
    startProductionServer({ DATABASE_URL, ...productionSecrets(), METRICS_TOKEN }),
    startProductionServer({ DATABASE_URL, ...productionSecrets() }),
  ]);
}, 120_000);
afterAll(async () => {
  await Promise.all([withToken?.stop(), withoutToken?.stop()]);
});

describe('GET /api/metrics from an anonymous client', () => {
  it('control: without the production rule, anyone reads the metrics', async () => {
    const response = await GET(new Request('http://localhost/api/metrics'));
    const text = await response.text();
    console.log(`[9b control] anonymous scrape, no production rule → ${response.status}`);
    expect(response.status).toBe(200);
    expect(text).toContain('idem_keys_in_flight');
  });

  it('protected: production with METRICS_TOKEN → 401 without or with a wrong token, 200 with it', async () => {
    const url = `${withToken.url}/api/metrics`;
    const anonymous = await fetch(url);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer realm="metrics"');
    expect(await anonymous.json()).toEqual({
      error: 'Send the metrics token: Authorization: Bearer <METRICS_TOKEN>.',
    });
    for (const authorization of [
      `Bearer ${METRICS_TOKEN}x`,
      `Bearer ${METRICS_TOKEN.slice(0, -1)}`,
      METRICS_TOKEN,
    ]) {
      const wrong = await fetch(url, { headers: { authorization } });
      expect(wrong.status).toBe(401);
      await wrong.body?.cancel();
    }
    const scraper = await fetch(url, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(scraper.status).toBe(200);
    expect(await scraper.text()).toContain('idem_keys_in_flight');
    console.log(
      `[9b protected] production: anonymous ${anonymous.status}, wrong token 401, token ${scraper.status}`,
    );
  });

  it('protected: production without METRICS_TOKEN keeps the endpoint closed (403)', async () => {
    const response = await fetch(`${withoutToken.url}/api/metrics`, {
      headers: { authorization: 'Bearer anything' },
    });
    expect(response.status).toBe(403);
    expect(await response.json()).toEqual({
      error: 'Metrics are disabled in production until METRICS_TOKEN is set.',
    });
  });
});
