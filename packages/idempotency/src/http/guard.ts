/**
 * One idempotent plain-HTTP request, whatever the framework: the core's guard (core/guard.ts) around the
 * handler, with the body read up to the route's limit and fingerprinted, and the answer to send — the handler's
 * own, a replay, or a problem. The adapters (./fetch, ./express) only translate their request and response to
 * and from this.
 */
import { IdempotencyMode, type IdempotencyOptions, resolveOptions } from '../core/config.ts';
import { IdempotencyError, IdempotencyErrorCode, type UnstableScope } from '../core/errors.ts';
import type { IdempotencyEvent } from '../core/event.ts';
import {
  externalRunner,
  guardRequest,
  type IdempotencyContext,
  type ModeRunner,
  transactionalRunner,
} from '../core/guard.ts';
import type { IdempotencyStore } from '../core/store.ts';
import type { HttpAnswer } from './answer.ts';
import { fingerprintHttpRequest, type HttpBody } from './fingerprint.ts';
import { idempotencyProblem, internalProblem, unauthenticatedProblem } from './problem.ts';
import { DEFAULT_REPLAYED_HEADERS, replayAnswerOf, responseToStore } from './stored.ts';

type MaybePromise<T> = T | Promise<T>;

export interface HttpIdempotencyConfig<TRequest, TTx> {
  store: IdempotencyStore<TTx>;
  /**
   * The principal the key belongs to, from the request (a session, a verified token) — never from a header the
   * client chooses freely. null → 401. `unstableScope(howToFix)` when there is a principal but a retry will not
   * have it → 400, nothing claimed.
   */
  getScope(request: TRequest): MaybePromise<string | null | undefined | UnstableScope>;
  /** Defaults for every route; each route may override them. */
  defaults?: IdempotencyOptions;
  onEvent?(event: IdempotencyEvent): void;
  /**
   * Every unexpected error (the handler threw, the database is down, the key table is missing): the client gets
   * a generic 500 problem, the cause comes here. Default `console.error`.
   */
  onError?(error: unknown): void;
  /**
   * Where your API documents its idempotency errors (an absolute URL). Set, every idempotency problem (400, 409,
   * 413, 422, 429, 503) carries `Link: <problemDocsUrl#<code>>; rel="describedby"`, the documentation pointer of
   * draft-ietf-httpapi-idempotency-key-header-07 §2.7. Unset (the default): no Link header.
   */
  problemDocsUrl?: string;
}

export interface HttpRouteOptions extends IdempotencyOptions {
  /**
   * The route's name: the namespace of its keys in the store, and part of the fingerprint. Default
   * `"<METHOD> <path>"` of each request (so `/orders/7/pay` and `/orders/8/pay` never share a key).
   */
  procedure?: string;
  /**
   * The response headers a replay repeats, besides status and body (case-insensitive). Default
   * `DEFAULT_REPLAYED_HEADERS`: Content-Type, Location, ETag.
   */
  replayedHeaders?: readonly string[];
  /**
   * The largest request body the route reads, in bytes: a longer one is refused with 413
   * (`idempotency_body_too_large`) as soon as its Content-Length or its bytes so far say so, before the handler
   * runs and before anything is claimed. Default `DEFAULT_MAX_BODY_BYTES` (1 MiB); `Infinity` reads any size.
   */
  maxBodyBytes?: number;
}

/** 1 MiB: ten times express.json()'s 100 kB, far above an API call, far below what blocks a process. */
export const DEFAULT_MAX_BODY_BYTES = 1_048_576;

/** What a handler behind the adapter finds about its request's key (the fingerprint: SHA-256 of the canonical route name, method, path, query and body). */
export type HttpIdempotencyContext = IdempotencyContext;

export interface TransactionalHttpContext<TTx> extends HttpIdempotencyContext {
  /** The transaction that also holds the claim and will hold the stored response: write through it. */
  tx: TTx;
}

/** What an adapter tells the guard about one request. */
export interface HttpRequestFacts<TRequest> {
  request: TRequest;
  method: string;
  /** The URL's path, without the query: the default route name. */
  path: string;
  /** The URL's path and query as sent (`/orders/7/pay?dryRun=1`): part of the fingerprint. */
  pathAndQuery: string;
  /** The raw `Idempotency-Key` header value, or null when absent. */
  keyHeader: string | null;
  /** The body, refused (`bodyTooLargeError`) past `maxBytes` without reading the rest. */
  readBody(maxBytes: number): MaybePromise<HttpBody>;
}

export type HttpRoute<TRequest, TContext> = (
  facts: HttpRequestFacts<TRequest>,
  runHandler: (idempotency: TContext) => Promise<HttpAnswer>,
) => Promise<HttpAnswer>;

/** Headers that carry credentials: never stored, so never replayed. */
export const NEVER_STORED_HEADERS: readonly string[] = [
  'set-cookie',
  'authorization',
  'proxy-authorization',
  'cookie',
];

export function createHttpGuard<TRequest, TTx>(config: HttpIdempotencyConfig<TRequest, TTx>) {
  const onError = config.onError ?? ((error: unknown) => console.error(error));
  if (config.problemDocsUrl !== undefined && !isDocsUrl(config.problemDocsUrl))
    throw new TypeError(
      `problemDocsUrl must be an absolute http(s) URL without a fragment, not ${JSON.stringify(config.problemDocsUrl)}.`,
    );

  function routeSettings(routeOptions: HttpRouteOptions = {}) {
    const { procedure, replayedHeaders, maxBodyBytes = DEFAULT_MAX_BODY_BYTES, ...options } = routeOptions;
    if (!(maxBodyBytes >= 0))
      throw new TypeError(`maxBodyBytes must be a number of bytes (0 or more), not ${String(maxBodyBytes)}.`);
    const replayed = (replayedHeaders ?? DEFAULT_REPLAYED_HEADERS).map((name) => name.toLowerCase());
    const credentials = replayed.filter((name) => NEVER_STORED_HEADERS.includes(name));
    if (credentials.length > 0)
      throw new TypeError(
        `replayedHeaders may not name ${credentials.join(', ')}: a replay would hand the first client's credentials to whoever sends its key.`,
      );
    return {
      procedure,
      maxBodyBytes,
      replayedHeaders: replayed,
      options: resolveOptions(config.defaults, options),
    };
  }

  async function guard(
    mode: IdempotencyMode,
    settings: ReturnType<typeof routeSettings>,
    facts: HttpRequestFacts<TRequest>,
    run: ModeRunner<HttpAnswer>,
  ): Promise<HttpAnswer> {
    const procedure = settings.procedure ?? `${facts.method.toUpperCase()} ${facts.path}`;
    try {
      const outcome = await guardRequest({
        mode,
        options: settings.options,
        procedure,
        keyHeader: facts.keyHeader,
        scope: () => config.getScope(facts.request),
        fingerprint: async () =>
          fingerprintHttpRequest(
            procedure,
            `${facts.method.toUpperCase()} ${facts.pathAndQuery}`,
            await facts.readBody(settings.maxBodyBytes),
          ),
        run,
        ...(config.onEvent ? { onEvent: config.onEvent } : {}),
      });
      if (outcome.kind === 'unauthenticated') return unauthenticatedProblem();
      if (outcome.kind === 'replayed') return replayAnswerOf(outcome.response);
      return outcome.result;
    } catch (error) {
      if (error instanceof IdempotencyError) {
        // The database's own error behind a 503 is the operator's to see, as for a 500.
        if (error.code === IdempotencyErrorCode.storeUnavailable) onError(error.cause);
        return idempotencyProblem(error, config.problemDocsUrl);
      }
      onError(error);
      return internalProblem();
    }
  }

  /** What to store of the handler's answer (null: release the key). */
  const storedOf = (settings: ReturnType<typeof routeSettings>) => (answer: HttpAnswer) =>
    responseToStore(answer, settings.options, settings.replayedHeaders);

  /** A route of `mode`: its settings read once, and per request the guard around the mode's runner. */
  function route<TContext>(
    mode: IdempotencyMode,
    routeOptions: HttpRouteOptions | undefined,
    runnerOf: (
      settings: ReturnType<typeof routeSettings>,
      runHandler: (idempotency: TContext) => Promise<HttpAnswer>,
    ) => ModeRunner<HttpAnswer>,
  ): HttpRoute<TRequest, TContext> {
    const settings = routeSettings(routeOptions);
    return (facts, runHandler) => guard(mode, settings, facts, runnerOf(settings, runHandler));
  }

  return {
    /**
     * The claim, the handler's writes (through `idempotency.tx`) and the stored response commit in ONE
     * transaction; the response is sent only after the commit.
     */
    transactional(routeOptions?: HttpRouteOptions): HttpRoute<TRequest, TransactionalHttpContext<TTx>> {
      return route(IdempotencyMode.transactional, routeOptions, (settings, runHandler) =>
        transactionalRunner(
          config.store,
          settings.options,
          (idempotency, tx) => runHandler({ ...idempotency, tx }),
          storedOf(settings),
        ),
      );
    },

    /**
     * For effects outside the database: the claim commits first under a lease (renewed while the handler runs),
     * and the completion is fenced by the lease owner. Forward `idempotency.key` to the outside service.
     */
    external(routeOptions?: HttpRouteOptions): HttpRoute<TRequest, HttpIdempotencyContext> {
      return route(IdempotencyMode.external, routeOptions, (settings, runHandler) =>
        externalRunner(
          config.store as IdempotencyStore<unknown>,
          settings.options,
          runHandler,
          storedOf(settings),
        ),
      );
    },
  };
}

/** An absolute http(s) URL with no fragment (the code is added as one) and nothing that would end the Link's `<…>`. */
function isDocsUrl(value: string): boolean {
  if (!URL.canParse(value) || /[<>\s#]/.test(value)) return false;
  return ['http:', 'https:'].includes(new URL(value).protocol);
}
