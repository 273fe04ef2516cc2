/**
 * The tRPC adapter: `createIdempotency(config)` returns `.concat()`-able procedures — `transactional()` and
 * `external()` — that make a mutation safe to retry.
 *
 *   charge: authedProcedure.concat(idempotency.external()).input(schema).mutation(…)
 */
import { initTRPC, TRPCError } from '@trpc/server';
import type { TRPCRequestInfo } from '@trpc/server/http';
import {
  IdempotencyMode,
  type IdempotencyOptions,
  type ResolvedOptions,
  resolveOptions,
} from '../core/config.ts';
import {
  batchedError,
  IdempotencyError,
  IdempotencyStoreSetupError,
  invalidInputError,
  streamedError,
  type UnstableScope,
} from '../core/errors.ts';
import type { IdempotencyEvent } from '../core/event.ts';
import { fingerprintRequest } from '../core/fingerprint.ts';
import {
  externalRunner,
  guardRequest,
  type IdempotencyContext,
  type ModeRunner,
  transactionalRunner,
} from '../core/guard.ts';
import type { StoredResponse } from '../core/record.ts';
import type { IdempotencyStore } from '../core/store.ts';
import { plainJsonWire, type WireTransformer } from '../core/wire-form.ts';
import type { MarkedIdempotent } from '../idempotent-procedure.ts';
import { IDEMPOTENCY_KEY_HEADER, IDEMPOTENT_REPLAYED_HEADER, RETRY_AFTER_HEADER } from '../protocol.ts';
import { replayedError, storedError, toTRPCError } from './errors.ts';

export type { IdempotencyEvent } from '../core/event.ts';

export interface CreateIdempotencyConfig<TContext, TTx> {
  store: IdempotencyStore<TTx>;
  /**
   * The router's transformer (`superjson`), so that stored results replay byte for byte. Leave it out only
   * when the router has none: the default is tRPC's identity (values travel as plain JSON).
   */
  transformer?: WireTransformer;
  /**
   * The principal the key belongs to, from the server's context. null → 401. `unstableScope(howToFix)` when
   * there is a principal but a retry will not have it (a guest session created by this very request) → 400,
   * nothing claimed.
   */
  getScope(ctx: TContext): string | null | undefined | UnstableScope;
  getRequestHeaders(ctx: TContext): Headers | undefined;
  /** Where to set `Idempotent-Replayed` and `Retry-After` (tRPC's fetch adapter: `resHeaders`). */
  getResponseHeaders?(ctx: TContext): Headers | undefined;
  /** True when the HTTP request carried several operations; an idempotent mutation must travel alone. */
  isBatched?(ctx: TContext): boolean;
  /**
   * True when the response is streamed (tRPC fetch adapter: `info.accept === 'application/jsonl'`, what
   * `httpBatchStreamLink` sends): its status and headers leave before the result, so an idempotent mutation
   * there is refused with 400 before anything is claimed. Pair it with `streamedResponseMeta` so that the HTTP
   * status of such a response is 400 too.
   */
  isStreamed?(ctx: TContext): boolean;
  /** Defaults for every procedure; each procedure may override them. */
  defaults?: IdempotencyOptions;
  onEvent?(event: IdempotencyEvent): void;
}

/** What an idempotent procedure finds in `ctx.idempotency` (the fingerprint: of the procedure path + input). */
export type IdempotentProcedureContext = IdempotencyContext;

export interface TransactionalProcedureContext<TTx> extends IdempotentProcedureContext {
  /** The transaction that also holds the claim and will hold the stored result. */
  tx: TTx;
}

interface GuardOptions<TContext> {
  ctx: TContext;
  path: string;
  type: string;
  getRawInput: () => Promise<unknown>;
}

export function createIdempotency<TContext extends object, TTx>(
  config: CreateIdempotencyConfig<TContext, TTx>,
) {
  const t = initTRPC.context<TContext>().create();
  const transformer = config.transformer ?? plainJsonWire;
  /** This instance's middlewares, to recognise its procedures in a request (`streamedResponseMeta`). */
  const ownMiddlewares = new WeakSet<object>();
  /**
   * Recorded as this instance's, and marked idempotent in its type (`MarkedIdempotent`): the same value, whose
   * error-shape type now carries the mark that `useIdempotentMutation` and `idempotentRetryLink` read.
   */
  function registered<TProcedure extends { _def: { middlewares: readonly object[] } }>(
    procedure: TProcedure,
  ): MarkedIdempotent<TProcedure> {
    for (const middleware of procedure._def.middlewares) ownMiddlewares.add(middleware);
    return procedure as unknown as MarkedIdempotent<TProcedure>;
  }

  /**
   * The core's guard around the procedure, and tRPC's side of it: its refusals, the error mapping, the
   * response headers, and a replay as a middleware result. `run` holds the mode's two ways to run; it is passed
   * in so each mode's `next()` call keeps its own context type.
   */
  async function guard<TResult extends MiddlewareResultLike>(
    mode: IdempotencyMode,
    options: ResolvedOptions,
    { ctx, path, type, getRawInput }: GuardOptions<TContext>,
    run: ModeRunner<TResult>,
  ): Promise<TResult> {
    if (type !== 'mutation') throw new Error(`Idempotency applies to mutations; ${path} is a ${type}.`);
    const responseHeaders = config.getResponseHeaders?.(ctx);
    try {
      const outcome = await guardRequest({
        mode,
        options,
        procedure: path,
        keyHeader: config.getRequestHeaders(ctx)?.get(IDEMPOTENCY_KEY_HEADER) ?? null,
        refuse: () => {
          if (config.isBatched?.(ctx)) throw batchedError();
          if (config.isStreamed?.(ctx)) throw streamedError();
        },
        scope: () => config.getScope(ctx),
        fingerprint: async () => fingerprintInput(path, await getRawInput(), transformer),
        run,
        ...(config.onEvent ? { onEvent: config.onEvent } : {}),
      });
      if (outcome.kind === 'unauthenticated')
        throw new TRPCError({ code: 'UNAUTHORIZED', message: 'An idempotent request needs a principal.' });
      if (outcome.kind === 'ran') return outcome.result;
      responseHeaders?.set(IDEMPOTENT_REPLAYED_HEADER, 'true');
      return replayResult<TResult>(outcome.response, transformer);
    } catch (error) {
      if (error instanceof IdempotencyStoreSetupError)
        throw new TRPCError({
          code: 'INTERNAL_SERVER_ERROR',
          message: 'Internal server error',
          cause: error,
        });
      if (!(error instanceof IdempotencyError)) throw error;
      if (error.retryAfterSeconds !== undefined)
        responseHeaders?.set(RETRY_AFTER_HEADER, String(error.retryAfterSeconds));
      throw toTRPCError(error);
    }
  }

  /** HTTP 400 for a streamed response that carries one of this instance's procedures (see the returned doc). */
  function streamedResponseMeta({ info }: { info?: TRPCRequestInfo | undefined }): { status?: number } {
    if (info?.accept !== 'application/jsonl') return {};
    const idempotentCall = info.calls.some((call) => usesAnyOf(call.procedure, ownMiddlewares));
    return idempotentCall ? { status: streamedError().httpStatus } : {};
  }

  return {
    /**
     * The claim, the procedure's writes and the stored result commit in ONE transaction, handed to the
     * procedure as `ctx.idempotency.tx`: write through it, or the writes are not covered.
     */
    transactional(perProcedure?: IdempotencyOptions) {
      const options = resolveOptions(config.defaults, perProcedure);
      const procedure = t.procedure.use((opts) => {
        const callNext = (idempotency: TransactionalProcedureContext<TTx>) =>
          opts.next({ ctx: { idempotency } });
        type Result = Awaited<ReturnType<typeof callNext>>;
        return guard<Result>(
          IdempotencyMode.transactional,
          options,
          { ...opts, ctx: asContext(opts.ctx) },
          transactionalRunner(
            config.store,
            options,
            (idempotency, tx) => callNext({ ...idempotency, tx }),
            (result) => toStoredResponse(result, options, transformer),
          ),
        );
      });
      return registered(procedure);
    },

    /**
     * For effects outside the database: the claim commits first under a lease; forward
     * `ctx.idempotency.key` to the outside service so its effect happens once too.
     */
    external(perProcedure?: IdempotencyOptions) {
      const options = resolveOptions(config.defaults, perProcedure);
      const procedure = t.procedure.use((opts) => {
        const callNext = (idempotency: IdempotentProcedureContext) => opts.next({ ctx: { idempotency } });
        type Result = Awaited<ReturnType<typeof callNext>>;
        return guard<Result>(
          IdempotencyMode.external,
          options,
          { ...opts, ctx: asContext(opts.ctx) },
          externalRunner(config.store as IdempotencyStore<unknown>, options, callNext, (result) =>
            toStoredResponse(result, options, transformer),
          ),
        );
      });
      return registered(procedure);
    },

    /**
     * For the HTTP handler's `responseMeta` (tRPC fetch adapter): a streamed response
     * (`trpc-accept: application/jsonl`) that carries a call to one of this instance's idempotent procedures
     * gets HTTP 400 — the status that the refusal inside it (`isStreamed`) would have had on a plain response.
     * Every other response: no change.
     *
     *   fetchRequestHandler({ …, responseMeta: (opts) => idempotency.streamedResponseMeta(opts) })
     */
    streamedResponseMeta,

    /**
     * For the HTTP handler's `responseMeta`, with every tRPC adapter: what `streamedResponseMeta` does, and the
     * middleware's own response headers (`Idempotent-Replayed`, `Retry-After`, read through
     * `getResponseHeaders` from the handler's context) put on the response. The Node adapters (standalone,
     * Express) give the context no response headers, so without this a replay never says it is one. Only
     * those two headers are copied, with set semantics: on the fetch adapter, whose `resHeaders` already are
     * the response's, nothing is doubled and no other header (a cookie) is touched.
     *
     *   createHTTPServer({ …, responseMeta: (opts) => idempotency.responseMeta(opts) })
     */
    responseMeta(opts: { ctx?: unknown; info?: TRPCRequestInfo | undefined }): {
      status?: number;
      headers?: Record<string, string>;
    } {
      const meta: { status?: number; headers?: Record<string, string> } = streamedResponseMeta(opts);
      // The handler's context, before any middleware: the getter reads the same field from it.
      const responseHeaders = opts.ctx ? config.getResponseHeaders?.(opts.ctx as TContext) : undefined;
      const headers: Record<string, string> = {};
      for (const name of [IDEMPOTENT_REPLAYED_HEADER, RETRY_AFTER_HEADER]) {
        const value = responseHeaders?.get(name);
        if (value !== null && value !== undefined) headers[name] = value;
      }
      if (Object.keys(headers).length > 0) meta.headers = headers;
      return meta;
    },
  };
}

/**
 * Whether a resolved procedure runs one of `middlewares`. tRPC keeps a procedure's middleware chain in its
 * `_def` at runtime without typing it on the resolved procedure; read defensively (absent → false, and the
 * refusal inside the stream still stops the call).
 */
function usesAnyOf(procedure: unknown, middlewares: WeakSet<object>): boolean {
  const definition = (procedure as { _def?: { middlewares?: unknown } } | null)?._def;
  const chain = definition?.middlewares;
  return Array.isArray(chain) && chain.some((middleware) => middlewares.has(middleware as object));
}

/** The parts of tRPC's (internal) middleware result this adapter reads. */
interface MiddlewareResultLike {
  ok: boolean;
  data?: unknown;
  error?: TRPCError;
}

/** What to store for a result, or null when the key must be released (not a deterministic outcome). */
function toStoredResponse(
  result: MiddlewareResultLike,
  options: ResolvedOptions,
  transformer: WireTransformer,
): StoredResponse | null {
  if (result.ok) {
    return {
      kind: 'output',
      httpStatus: 200,
      body: JSON.stringify(transformer.serialize(result.data)) ?? 'null',
    };
  }
  if (result.error && options.storedErrorCodes.includes(result.error.code)) return storedError(result.error);
  return null;
}

/**
 * A duplicate's result, rebuilt from the stored response without running the procedure. tRPC has no public
 * constructor for a middleware result (it brands them so that middlewares pass `next()`'s result through);
 * this is the one place that builds one, with the same runtime shape.
 */
function replayResult<TResult>(response: StoredResponse, transformer: WireTransformer): TResult {
  if (response.kind === 'error')
    return { ok: false, error: replayedError(response), marker: 'middlewareMarker' } as TResult;
  const data = transformer.deserialize(JSON.parse(response.body));
  return { ok: true, data, marker: 'middlewareMarker' } as TResult;
}

/**
 * The input as the transformer sends it on the wire. tRPC hands middlewares the *deserialized* input, in which
 * superjson's Map and Set would canonicalize to `{}` (two different requests with one fingerprint) and a BigInt
 * would make canonical JSON throw. No input stays null, as in `fingerprintRequest`.
 */
function wireInput(input: unknown, transformer: WireTransformer): unknown {
  return input === undefined || input === null ? null : transformer.serialize(input);
}

/**
 * Hostile input can make fingerprinting throw — a lone surrogate (canonicalize refuses it) or JSON nested a few
 * thousand levels deep (superjson's walker overflows the stack). Both are the client's input, never a server
 * fault: 400, before anything is claimed.
 */
function fingerprintInput(path: string, input: unknown, transformer: WireTransformer): string {
  try {
    return fingerprintRequest(path, wireInput(input, transformer));
  } catch {
    throw invalidInputError();
  }
}

/**
 * tRPC types a procedure's ctx as a mapped copy of the context type (`Simplify<…>`), which a generic
 * `TContext` cannot be proven equal to; at runtime it is the very object the caller's context produced.
 */
function asContext<TContext>(ctx: unknown): TContext {
  return ctx as TContext;
}
