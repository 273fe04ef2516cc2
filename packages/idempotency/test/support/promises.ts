/** Promise helpers the handler tests share. */

/** The error `promise` rejects with; fails the test if it resolves. */
export async function caught(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

/** `promise`, and whether it has settled yet: to check that something is still waiting. */
export function watchSettled<T>(promise: Promise<T>): { promise: Promise<T>; settled(): boolean } {
  let done = false;
  const watched = promise.finally(() => {
    done = true;
  });
  return { promise: watched, settled: () => done };
}
