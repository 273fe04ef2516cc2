/**
 * A gate that holds executions in flight for as long as a check needs, instead of a latency that must outlast
 * it: the in-flight checks wait on events ("n executions are held"), never on the clock.
 */

/** What a check sees of a target's gate while `withHeldExecutions` runs. */
export interface ExecutionGate {
  /** Resolves once at least `count` executions are waiting at the gate. */
  reached(count: number): Promise<void>;
  /** Lets every waiting execution go on; executions that reach the gate afterwards pass at once. */
  release(): Promise<void>;
}

/**
 * A gate for an app in this process: the procedure calls `pass()` where it should stop (after its claim, e.g.
 * before calling out); the target gives `withHeldExecutions: gate.holdWhile`. Outside `holdWhile`, `pass()`
 * resolves at once.
 */
export interface InProcessGate {
  pass(): Promise<void>;
  holdWhile<T>(run: (gate: ExecutionGate) => Promise<T>): Promise<T>;
}

export function createInProcessGate(): InProcessGate {
  let holding = false;
  let waiting: Array<() => void> = [];
  let watchers: Array<{ count: number; resolve: () => void }> = [];

  const notify = () => {
    const met = watchers.filter((watcher) => waiting.length >= watcher.count);
    watchers = watchers.filter((watcher) => waiting.length < watcher.count);
    for (const watcher of met) watcher.resolve();
  };
  const releaseAll = () => {
    holding = false;
    const released = waiting;
    waiting = [];
    for (const go of released) go();
  };
  const gate: ExecutionGate = {
    reached: (count) =>
      new Promise<void>((resolve) => {
        watchers.push({ count, resolve });
        notify();
      }),
    release: async () => releaseAll(),
  };

  return {
    pass() {
      if (!holding) return Promise.resolve();
      return new Promise<void>((resolve) => {
        waiting.push(resolve);
        notify();
      });
    },
    async holdWhile(run) {
      holding = true;
      try {
        return await run(gate);
      } finally {
        releaseAll();
      }
    },
  };
}
