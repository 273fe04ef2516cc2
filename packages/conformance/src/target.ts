/**
 * The command's options as a conformance target of the kit (`protocol: 'http'`), with the execution counter the
 * options name: an endpoint that counts, or the distinct effect ids seen in success bodies.
 */
import { randomUUID } from 'node:crypto';
import type { ConformanceFetch, ConformanceResponse, ConformanceTarget } from '@idem/idempotency/testing';
import type { CliOptions } from './options.ts';

type Json = unknown;

/** The value at a JSON Pointer (RFC 6901) in `document`, or undefined. */
export function valueAt(document: Json, pointer: string): Json {
  let current: Json = document;
  for (const raw of pointer.split('/').slice(1)) {
    const token = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, Json>)[token];
  }
  return current;
}

/**
 * A response whose body has been read once and can be read again; `markReplayed` adds `Idempotent-Replayed: true`
 * to a route that does not send it (the effect it names was seen before: nothing new was executed).
 */
function buffered(response: ConformanceResponse, text: string, markReplayed: boolean): ConformanceResponse {
  const headers = markReplayed
    ? {
        get: (name: string) =>
          name.toLowerCase() === 'idempotent-replayed' ? 'true' : response.headers.get(name),
      }
    : response.headers;
  return { status: response.status, headers, text: async () => text };
}

function bodyFrom(template: string): Json {
  return JSON.parse(template.replaceAll('{{uuid}}', randomUUID()));
}

export function cliTarget(options: CliOptions, baseFetch: ConformanceFetch = fetch): ConformanceTarget<Json> {
  /** Every effect a success named: the executions, when `--effect-pointer` counts them. */
  const effects = new Set<string>();
  /**
   * The effects named by successes the route did not mark as replays. A later unmarked success naming one of
   * them is a replay (inferred); a marked replay is not an execution, whatever order the answers arrive in.
   */
  const executed = new Set<string>();
  const observing: ConformanceFetch = async (url, init) => {
    const response = await baseFetch(url, init);
    if (options.effectPointer === null || response.status < 200 || response.status > 299) return response;
    const text = await response.text();
    const unmarked = response.headers.get('idempotent-replayed') === null;
    let inferredReplay = false;
    try {
      const effect = valueAt(JSON.parse(text), options.effectPointer);
      if (effect !== undefined && effect !== null) {
        const id = JSON.stringify(effect);
        effects.add(id);
        if (unmarked) {
          inferredReplay = executed.has(id);
          executed.add(id);
        }
      }
    } catch {
      // Not JSON: no effect id to read; the check that sent it judges the body.
    }
    return buffered(response, text, options.inferReplays && inferredReplay);
  };
  const countFrom = options.executionsUrl;
  return {
    protocol: 'http',
    url: options.url,
    procedure: `POST ${new URL(options.url).pathname}`,
    input: () => bodyFrom(options.body),
    differentInput: () => {
      if (options.otherBody !== null) return bodyFrom(options.otherBody);
      const body = bodyFrom(options.body);
      if (body === null || typeof body !== 'object' || Array.isArray(body))
        throw new Error('--body is not a JSON object: give --other-body');
      return { ...body, idemConformanceProbe: randomUUID() };
    },
    invalidInput: () => JSON.parse(options.invalidBody),
    ...(options.businessErrorBody === null
      ? {}
      : { businessErrorInput: () => bodyFrom(options.businessErrorBody ?? 'null') }),
    principals: [{ headers: options.headers }, { headers: options.otherHeaders ?? options.headers }],
    unauthenticatedHeaders: {},
    fetch: observing,
    async executions() {
      if (countFrom === null) return effects.size;
      const response = await fetch(countFrom, { headers: options.headers });
      const body: Json = await response.json();
      const count = typeof body === 'number' ? body : valueAt(body, '/count');
      if (typeof count !== 'number')
        throw new Error(`${countFrom} answered ${JSON.stringify(body)}, not a count`);
      return count;
    },
  };
}
