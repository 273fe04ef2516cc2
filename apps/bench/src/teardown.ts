/** What a benchmark started, to undo at the end, also on failure and on Ctrl-C. */
import { messageOf } from './repository.ts';

export type TeardownStep = () => Promise<void>;

/** Steps run in reverse order of registration, each once; a failure is logged under `label` and skipped. */
export class Teardown {
  private readonly steps: TeardownStep[] = [];
  private running: Promise<void> | undefined;

  constructor(private readonly label = '[bench:storage] teardown') {}

  add(step: TeardownStep): void {
    this.steps.push(step);
  }

  run(): Promise<void> {
    this.running ??= (async () => {
      for (const step of this.steps.reverse()) {
        try {
          await step();
        } catch (error) {
          console.error(`${this.label}: ${messageOf(error)}`);
        }
      }
    })();
    return this.running;
  }
}
