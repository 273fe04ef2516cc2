/** One line per event, on stdout (info) or stderr (error). Tests pass their own to collect or silence lines. */
export interface Logger {
  info(line: string): void;
  error(line: string, error?: unknown): void;
}

export const consoleLogger: Logger = {
  info: (line) => console.log(`[worker] ${line}`),
  error: (line, error) => {
    const detail = error === undefined ? '' : `: ${messageOf(error)}`;
    console.error(`[worker] ${line}${detail}`);
  },
};

/** The last line of an error's message: Prisma's messages repeat the invocation before the database's reason. */
export function messageOf(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.trim().split('\n').at(-1) ?? text;
}
