/**
 * The tRPC adapter: `createIdempotency(config)` returns `.concat()`-able procedures — `transactional()` and
 * `external()` — that make a mutation safe to retry.
 *
 *   placeOrder: authedProcedure.concat(idempotency.external()).input(schema).mutation(…)
 */
import { initTRPC, TRPCError } from '@trpc/server';
import {
  IdempotencyMode,
  type IdempotencyOptions,
  type ResolvedOptions,
  resolveOptions,
} from '../core/config.ts';
import { batchedError, IDEMPOTENCY_KEY_HEADER, IdempotencyError, invalidInputError } from '../core/errors.ts';
import { fingerprintRequest } from '../core/fingerprint.ts';
import {
  type FaultHooks,
  type HandledRequest,
  handleExternal,
  handleTransactional,
  type IdempotentRequest,
} from '../core/handler.ts';
import { parseIdempotencyKey } from '../core/key.ts';
import { RequestOutcome, type StoredResponse } from '../core/record.ts';
import type { IdempotencyStore } from '../core/store.ts';
import { replayedError, storedError, toTRPCError } from './errors.ts';

/** superjson, or any transformer with the same two functions. Must match the router's transformer. */
export interface ResultTransformer {
  serialize(value: unknown): unknown;
  deserialize(value: never): unknown;
}

export interface IdempotencyEvent {
  procedure: string;
  mode: IdempotencyMode;
  outcome: RequestOutcome;
  durationMs: number;
  /** The key itself never leaves the store: logs and metrics get its fingerprint. */
  keyHash: string | null;
}

export interface CreateIdempotencyConfig<TContext, TTx> {
  store: IdempotencyStore<TTx>;
  transformer: ResultTransformer;
  /** The principal the key belongs to, from the server's context. null → 401. */
  getScope(ctx: TContext): string | null | undefined;
  getRequestHeaders(ctx: TContext): Headers | undefined;
  /** Where to set `Idempotent-Replayed` and `Retry-After` (tRPC's fetch adapter: `resHeaders`). */
  getResponseHeaders?(ctx: TContext): Headers | undefined;
  /** True when the HTTP request carried several operations; an idempotent mutation must travel alone. */
  isBatched?(ctx: TContext): boolean;
  /** Defaults for every procedure; each procedure may override them. */
  defaults?: IdempotencyOptions;
  onEvent?(event: IdempotencyEvent): void;
  /**
   * TEST-ONLY fault points (see `FaultHooks`): let a fault test crash the process right after the claim,
   * between the procedure's effect and the completion, or after the result is stored. Leave unset in
   * production; they must never be armable from a request.
   */
  faultHooks?: FaultHooks;
}

/** What an idempotent procedure finds in `ctx.idempotency`. */
export interface IdempotencyContext {
  /** The client's key: forward it (or something derived from it) to every outside service. */
  key: string;
  /** The principal the key is scoped to. */
  scope: string;
  /**
   * The request fingerprint (SHA-256 of the canonical procedure path + input). Name effects after
   * (scope, key, fingerprint) rather than the key alone: once a key has expired it may come back with a
   * different request, which must not resume the old one's effects.
   */
  fingerprint: string;
}

export interface TransactionalIdempotencyContext<TTx> extends IdempotencyContext {
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

  /**
   * Everything around running the procedure: key, scope, fingerprint, error mapping, replay, headers and
   * events. `execute` runs the mode's lifecycle; it is passed in so each mode's `next()` call keeps its own
   * context type.
   */
  async function guard<TResult extends MiddlewareResultLike>(
    mode: IdempotencyMode,
    { ctx, path, type, getRawInput }: GuardOptions<TContext>,
    execute: (
      request: IdempotentRequest,
      idempotency: IdempotencyContext,
    ) => Promise<HandledRequest<TResult>>,
  ): Promise<TResult> {
    if (type !== 'mutation') throw new Error(`Idempotency applies to mutations; ${path} is a ${type}.`);
    const started = performance.now();
    const responseHeaders = config.getResponseHeaders?.(ctx);
    let keyHash: string | null = null;
    const report = (outcome: RequestOutcome) =>
      config.onEvent?.({ procedure: path, mode, outcome, durationMs: performance.now() - started, keyHash });

    let handled: HandledRequest<TResult>;
    try {
      if (config.isBatched?.(ctx)) throw batchedError();
      const key = parseIdempotencyKey(config.getRequestHeaders(ctx)?.get(IDEMPOTENCY_KEY_HEADER));
      const scope = config.getScope(ctx);
      if (!scope)
        throw new TRPCError({ code: 'UNAUTHORIZED', message: 'An idempotent request needs a principal.' });
      // Only hashed when someone listens: the request path pays for no work nobody reads.
      if (config.onEvent) keyHash = fingerprintRequest('key', [scope, key]).slice(0, 16);
      const request = {
        scope,
        procedure: path,
        key,
        fingerprint: fingerprintInput(path, await getRawInput(), config.transformer),
      };
      handled = await execute(request, { key, scope, fingerprint: request.fingerprint });
    } catch (error) {
      if (!(error instanceof IdempotencyError)) throw error;
      if (error.retryAfterSeconds !== undefined)
        responseHeaders?.set('Retry-After', String(error.retryAfterSeconds));
      report(outcomeOfError(error));
      throw toTRPCError(error);
    }

    if (handled.kind === 'replayed') {
      responseHeaders?.set('Idempotent-Replayed', 'true');
      report(RequestOutcome.replayed);
      return replayResult<TResult>(handled.response, config.transformer);
    }
    report(handled.kind === 'executed' ? RequestOutcome.executed : RequestOutcome.released);
    return handled.result;
  }

  return {
    /**
     * The claim, the procedure's writes and the stored result commit in ONE transaction, handed to the
     * procedure as `ctx.idempotency.tx`: write through it, or the writes are not covered.
     */
    transactional(perProcedure?: IdempotencyOptions) {
      const options = resolveOptions(config.defaults, perProcedure);
      return t.procedure.use((opts) => {
        const callNext = (idempotency: TransactionalIdempotencyContext<TTx>) =>
          opts.next({ ctx: { idempotency } });
        type Result = Awaited<ReturnType<typeof callNext>>;
        return guard<Result>(
          IdempotencyMode.transactional,
          { ...opts, ctx: asContext(opts.ctx) },
          (request, idempotency) =>
            handleTransactional<TTx, Result>(
              config.store,
              options,
              request,
              async (tx) => {
                const result = await callNext({ ...idempotency, tx });
                return { result, response: toStoredResponse(result, options, config.transformer) };
              },
              config.faultHooks,
            ),
        );
      });
    },

    /**
     * For effects outside the database: the claim commits first under a lease; forward
     * `ctx.idempotency.key` to the outside service so its effect happens once too.
     */
    external(perProcedure?: IdempotencyOptions) {
      const options = resolveOptions(config.defaults, perProcedure);
      return t.procedure.use((opts) => {
        const callNext = (idempotency: IdempotencyContext) => opts.next({ ctx: { idempotency } });
        type Result = Awaited<ReturnType<typeof callNext>>;
        return guard<Result>(
          IdempotencyMode.external,
          { ...opts, ctx: asContext(opts.ctx) },
          (request, idempotency) =>
            handleExternal<Result>(
              config.store as IdempotencyStore<unknown>,
              options,
              request,
              async () => {
                const result = await callNext(idempotency);
                return { result, response: toStoredResponse(result, options, config.transformer) };
              },
              config.faultHooks,
            ),
        );
      });
    },
  };
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
  transformer: ResultTransformer,
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
function replayResult<TResult>(response: StoredResponse, transformer: ResultTransformer): TResult {
  if (response.kind === 'error')
    return { ok: false, error: replayedError(response), marker: 'middlewareMarker' } as TResult;
  const data = transformer.deserialize(JSON.parse(response.body) as never);
  return { ok: true, data, marker: 'middlewareMarker' } as TResult;
}

/**
 * Fix: the input as the transformer sends it on the wire. tRPC hands middlewares the *deserialized* input, in
 * which superjson's Map and Set canonicalize to `{}` (two different requests got the same fingerprint, so the
 * second replayed the first's result instead of a 422) and a BigInt made canonical JSON throw (every such
 * request failed with a 500). No input stays null, as in `fingerprintRequest`.
 */
function wireInput(input: unknown, transformer: ResultTransformer): unknown {
  return input === undefined || input === null ? null : transformer.serialize(input);
}

/**
 * Fix: hostile input made fingerprinting throw — a lone surrogate (canonicalize refuses it) or JSON nested a few
 * thousand levels deep (superjson's walker overflows the stack) — and every such request was a 500. Both are
 * the client's input, never a server fault: 400, before anything is claimed.
 */
function fingerprintInput(path: string, input: unknown, transformer: ResultTransformer): string {
  try {
    return fingerprintRequest(path, wireInput(input, transformer));
  } catch {
    throw invalidInputError();
  }
}

function outcomeOfError(error: IdempotencyError): RequestOutcome {
  if (error.httpStatus === 409) return RequestOutcome.conflict;
  if (error.httpStatus === 422) return RequestOutcome.mismatch;
  return RequestOutcome.rejected;
}

/**
 * tRPC types a procedure's ctx as a mapped copy of the context type (`Simplify<…>`), which a generic
 * `TContext` cannot be proven equal to; at runtime it is the very object the caller's context produced.
 */
function asContext<TContext>(ctx: unknown): TContext {
  return ctx as TContext;
}
