/**
 * The type-level mark of an idempotent procedure: what `idempotency.transactional()` / `.external()` put in a
 * procedure's type, and what the client side reads back. Types only: nothing here exists at runtime.
 *
 * tRPC carries three things of a procedure into its clients' types: its input, its output and (since the
 * per-procedure `.errors()`) its error shape. Input and output belong to the app, so the mark travels in the
 * error shape: the idempotency builders add `IdempotentErrorShape` to the union of shapes the procedure's
 * errors may have (a type-only change: the builder at runtime is the same object). The union survives
 * `.concat()`, `.use()`, `.input()` and the router, and reaches the clients' error types — among them
 * `@trpc/tanstack-react-query`'s `mutationOptions()` — so `useIdempotentMutation` can refuse a procedure
 * without it, and `IdempotentProcedurePath` can list a router's idempotent mutations.
 */
import type {
  AnyTRPCProcedure,
  TRPCDefaultErrorShape,
  TRPCProcedureBuilder,
  TRPCRouterRecord,
} from '@trpc/server';

/** The mark's key. Declared, never created: no value carries it, so no code can fake or read it. */
declare const idempotentProcedure: unique symbol;

/** tRPC's default error shape, marked: one member of an idempotent procedure's error-shape union. */
export type IdempotentErrorShape = TRPCDefaultErrorShape & { readonly [idempotentProcedure]: true };

/** True when the error-shape union `TShape` holds the mark (`any` does not count). */
export type HasIdempotentMark<TShape> = 0 extends 1 & TShape
  ? false
  : [Extract<TShape, { readonly [idempotentProcedure]: true }>] extends [never]
    ? false
    : true;

/** True when `TError` (a `TRPCClientError` / `TRPCClientErrorLike`) is the error of a marked procedure. */
export type IsIdempotentProcedureError<TError> = TError extends { readonly shape: infer TShape }
  ? HasIdempotentMark<NonNullable<TShape>>
  : false;

/** `TBuilder` with the mark added to the error shapes it may produce; every other type parameter kept. */
export type MarkedIdempotent<TBuilder> =
  TBuilder extends TRPCProcedureBuilder<
    infer TContext,
    infer TMeta,
    infer TContextOverrides,
    infer TInputIn,
    infer TInputOut,
    infer TOutputIn,
    infer TOutputOut,
    infer TCaller,
    infer TErrorShape
  >
    ? TRPCProcedureBuilder<
        TContext,
        TMeta,
        TContextOverrides,
        TInputIn,
        TInputOut,
        TOutputIn,
        TOutputOut,
        TCaller,
        TErrorShape | IdempotentErrorShape
      >
    : never;

/** The dotted paths (`'checkout.placeOrder'`) of a router record's marked mutations, nested routers included. */
export type IdempotentPathsOf<TRecord, TPrefix extends string = ''> = {
  [TName in keyof TRecord & string]: TRecord[TName] extends AnyTRPCProcedure
    ? TRecord[TName]['_def']['type'] extends 'mutation'
      ? HasIdempotentMark<TRecord[TName]['_def']['$types']['errorShape']> extends true
        ? `${TPrefix}${TName}`
        : never
      : never
    : TRecord[TName] extends TRPCRouterRecord
      ? IdempotentPathsOf<TRecord[TName], `${TPrefix}${TName}.`>
      : never;
}[keyof TRecord & string];

/** The paths of `TRouter`'s idempotent mutations; `string` for a router whose type is not known. */
export type IdempotentProcedurePath<TRouter extends { _def: { record: unknown } }> = 0 extends 1 &
  TRouter['_def']['record']
  ? string
  : IdempotentPathsOf<TRouter['_def']['record']>;
