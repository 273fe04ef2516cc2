/**
 * Progress of a long `pnpm bench` on the terminal: which section runs, which run of how many, and the time left —
 * the current section's from its own pace (elapsed ÷ runs done × runs left), the later sections' from their
 * planned seconds scaled by how far this machine has been off the plan so far.
 */
import { performance } from 'node:perf_hooks';

export interface PlannedSection {
  name: string;
  /** Estimated seconds on a quiet 2-core machine; 0 for a section that will not run. */
  seconds: number;
}

export interface Progress {
  /** Starts `name` (ends the previous section) and prints the time left. */
  section(name: string): void;
  /** Run `done` of `total` of the current section has started. */
  run(done: number, total: number): void;
  /** A log function for the current section that turns its "run i/N" lines into `run()` calls. */
  logger(print: (line: string) => void): (line: string) => void;
}

const RUN_LINE = /\brun (\d+)\/(\d+)\b/;

export function createProgress(plan: PlannedSection[], print: (line: string) => void): Progress {
  const startedAt = performance.now();
  let current: { name: string; startedAt: number; planned: number } | null = null;
  /** Seconds actually spent ÷ seconds planned, over the sections finished so far. */
  let spent = 0;
  let planned = 0;

  const later = () => {
    const index = plan.findIndex((section) => section.name === current?.name);
    return plan.slice(index + 1).reduce((sum, section) => sum + section.seconds, 0);
  };
  const pace = () => (planned > 0 ? spent / planned : 1);
  const format = (seconds: number) => {
    const s = Math.max(0, Math.round(seconds));
    return s >= 60 ? `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s` : `${s} s`;
  };

  function finishCurrent() {
    if (!current) return;
    spent += (performance.now() - current.startedAt) / 1000;
    planned += current.planned;
  }

  function report(sectionLeft: number, label: string) {
    const total = sectionLeft + later() * pace();
    const elapsed = (performance.now() - startedAt) / 1000;
    print(
      `── ${label} · section ~${format(sectionLeft)} left · all ~${format(total)} left (${format(elapsed)} so far)`,
    );
  }

  const progress: Progress = {
    section(name) {
      finishCurrent();
      const entry = plan.find((section) => section.name === name);
      current = { name, startedAt: performance.now(), planned: entry?.seconds ?? 0 };
      report(current.planned * pace(), `${name}`);
    },
    run(done, total) {
      if (!current) return;
      const elapsed = (performance.now() - current.startedAt) / 1000;
      // Before the first run ends there is no pace of its own yet: the plan, scaled.
      const left = done > 1 ? (elapsed / (done - 1)) * (total - done + 1) : current.planned * pace();
      report(left, `${current.name}: run ${done}/${total}`);
    },
    logger(printLine) {
      return (line) => {
        printLine(line);
        const match = RUN_LINE.exec(line);
        if (match) progress.run(Number(match[1]), Number(match[2]));
      };
    },
  };
  return progress;
}
