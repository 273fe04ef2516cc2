/**
 * The retry link's refusal of an idempotent mutation sent without a usable key (`requireKeyFor`): raised in
 * the browser before the request leaves, never by the server. It is the `cause` of the `TRPCClientError` the
 * call fails with; the retry policy treats it as final (a retry would be refused the same way).
 */
export class MissingIdempotencyKeyError extends Error {
  override readonly name = 'MissingIdempotencyKeyError';

  constructor(readonly path: string) {
    super(
      `${path} is idempotent: call it with a key (useIdempotentMutation, or context.idempotencyKey). Not sent.`,
    );
  }
}
