/**
 * A throw-away database on DATABASE_URL's server, migrated with the repo's own migrations (the real
 * `idempotency_keys` table and its indexes), and the list of things to undo at the end — also on Ctrl-C.
 */
import {
  createDatabase,
  dropDatabase,
  messageOf,
  migrateDatabase,
  scratchDatabaseName,
} from '../repository.ts';

export type TeardownStep = () => Promise<void>;

/** Steps run in reverse order of registration, each once, failures logged and skipped. */
export class Teardown {
  private readonly steps: TeardownStep[] = [];
  private running: Promise<void> | undefined;

  add(step: TeardownStep): void {
    this.steps.push(step);
  }

  run(): Promise<void> {
    this.running ??= (async () => {
      for (const step of this.steps.reverse()) {
        try {
          await step();
        } catch (error) {
          console.error(`[bench:storage] teardown: ${messageOf(error)}`);
        }
      }
    })();
    return this.running;
  }
}

export interface ScratchDatabase {
  name: string;
  url: string;
}

export async function createMigratedScratchDatabase(
  adminUrl: string,
  teardown: Teardown,
): Promise<ScratchDatabase> {
  const name = scratchDatabaseName('idem_bench_storage');
  const url = await createDatabase(adminUrl, name);
  teardown.add(() => dropDatabase(adminUrl, name));
  await migrateDatabase(url);
  return { name, url };
}
