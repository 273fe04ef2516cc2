/**
 * `pnpm test` after the build: the Node suites (vitest) and the browser suites (Playwright) run at the same time.
 * Both mostly wait — on Postgres, MariaDB, child processes, a browser — so side by side on two cores they take
 * about as long as the longer of the two, not their sum (figures: README, "CI"). They share nothing that could
 * collide: vitest's files make scratch databases and take free ports, Playwright's stack has its own embedded
 * Postgres and fixed ports (playwright.config.ts). Both run to the end, so one failure does not hide another.
 */
import path from 'node:path';
import { type ManagedProcess, startProcess, stopProcesses } from './lib/processes.ts';

const repoRoot = path.resolve(import.meta.dirname, '..');
const bin = (name: string) => path.join(repoRoot, 'node_modules/.bin', name);

const suites: ManagedProcess[] = [
  startProcess('vitest', bin('vitest'), ['run'], { cwd: repoRoot, env: process.env, color: 36 }),
  startProcess('playwright', bin('playwright'), ['test'], { cwd: repoRoot, env: process.env, color: 35 }),
];
const started = performance.now();

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void stopProcesses(suites).then(() => process.exit(1));
  });
}

const results = await Promise.all(
  suites.map(async ({ name, exited }) => {
    const code = await exited;
    return { name, code, seconds: Math.round((performance.now() - started) / 1000) };
  }),
);
for (const { name, code, seconds } of results) {
  console.log(`${name}: ${code === 0 ? 'passed' : `FAILED (exit ${code})`} after ${seconds} s`);
}
process.exit(results.every(({ code }) => code === 0) ? 0 : 1);
