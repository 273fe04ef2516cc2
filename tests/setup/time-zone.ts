/**
 * Setup of the `new-york` test project (vitest.config.ts): its tests run with TZ=America/New_York, so code
 * that reads a date in the machine's local zone where it means UTC fails there even on a UTC machine. Fails
 * the run if the zone did not take effect (a January date in New York is 5 hours behind UTC).
 */
const offsetMinutes = new Date(Date.UTC(2026, 0, 15, 12)).getTimezoneOffset();
if (offsetMinutes !== 300)
  throw new Error(`The new-york project must run in America/New_York; the offset is ${offsetMinutes} min`);
