import 'server-only';
import { env } from '~/env';

/**
 * Test-only switches that turn a protection OFF, so each fault test can run a control showing the fault bites.
 * Honoured only when the process was started with IDEM_TEST_HOOKS=1 (the e2e stack and vitest), never from a
 * request on its own.
 */
export const testHooks = {
  get webhookDedupeDisabled(): boolean {
    return env.IDEM_TEST_HOOKS === '1' && process.env.WEBHOOK_TEST_DISABLE_DEDUPE === '1';
  },
};
