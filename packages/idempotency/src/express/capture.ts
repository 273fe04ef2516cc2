/**
 * Holds back an Express response while the idempotency layer decides what to send: the handler's `write`,
 * `writeHead` and `end` (which `res.send`, `res.json`, `res.redirect` and piped streams all end in) are
 * recorded instead of sent, so that in transactional mode nothing leaves before the commit, and so that the
 * body can be stored. Headers the handler sets stay on `res` (Node sends none before `writeHead`).
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Response } from 'express';
import { type HttpAnswer, hasNullBody } from '../http/answer.ts';

type Callback = (error?: Error | null) => void;

export interface HeldResponse {
  /** Settles when the handler ends its response. */
  answer: Promise<HttpAnswer>;
}

export interface ResponseHold {
  /** Starts recording the handler's response. */
  capture(): HeldResponse;
  /** Gives `res` its own methods back and sends `answer` (the handler's, a replay or a problem). */
  send(answer: HttpAnswer): void;
}

export function holdResponse(res: Response): ResponseHold {
  const original = {
    write: res.write,
    writeHead: res.writeHead,
    end: res.end,
    flushHeaders: res.flushHeaders,
  };
  const headersBefore = res.getHeaders();
  let restore = () => {};

  return {
    capture() {
      const chunks: Uint8Array[] = [];
      const record = (chunk: unknown, encoding: unknown) => {
        if (chunk === undefined || chunk === null || typeof chunk === 'function') return;
        chunks.push(
          typeof chunk === 'string'
            ? Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8')
            : (chunk as Uint8Array),
        );
      };
      const answer = new Promise<HttpAnswer>((resolve) => {
        res.write = ((chunk: unknown, encoding?: unknown, callback?: unknown) => {
          record(chunk, encoding);
          callbackOf(encoding, callback)?.();
          return true;
        }) as Response['write'];
        res.writeHead = ((status: number, ...rest: unknown[]) => {
          res.statusCode = status;
          const headers = rest.find((item) => typeof item === 'object' && item !== null);
          if (headers) applyHeaders(res, headers as OutgoingHttpHeaders | string[]);
          return res;
        }) as Response['writeHead'];
        res.flushHeaders = () => {};
        res.end = ((chunk?: unknown, encoding?: unknown, callback?: unknown) => {
          record(chunk, encoding);
          resolve({
            status: res.statusCode,
            headers: headerList(res.getHeaders()),
            body: Buffer.concat(chunks),
          });
          callbackOf(chunk, encoding, callback)?.();
          return res;
        }) as Response['end'];
      });
      restore = () => Object.assign(res, original);
      return { answer };
    },

    send(answer) {
      restore();
      // Only the answer's headers on top of what earlier middleware set: none of a handler's whose answer is
      // not the one sent (a replay, a 409 after a lost lease).
      for (const name of res.getHeaderNames()) res.removeHeader(name);
      for (const [name, value] of Object.entries(headersBefore))
        if (value !== undefined) res.setHeader(name, value);
      const grouped = new Map<string, string[]>();
      for (const [name, value] of answer.headers) {
        const lower = name.toLowerCase();
        if (lower === 'content-length' || lower === 'transfer-encoding') continue;
        grouped.set(lower, [...(grouped.get(lower) ?? []), value]);
      }
      for (const [name, values] of grouped)
        res.setHeader(name, values.length === 1 ? (values[0] as string) : values);
      res.statusCode = answer.status;
      if (hasNullBody(answer.status)) {
        res.end();
        return;
      }
      res.setHeader('content-length', answer.body.byteLength);
      res.end(answer.body);
    },
  };
}

function callbackOf(...candidates: unknown[]): Callback | undefined {
  return candidates.find((candidate): candidate is Callback => typeof candidate === 'function');
}

function applyHeaders(res: Response, headers: OutgoingHttpHeaders | string[]) {
  if (Array.isArray(headers)) {
    for (let index = 0; index + 1 < headers.length; index += 2)
      res.appendHeader(headers[index] as string, headers[index + 1] as string);
    return;
  }
  for (const [name, value] of Object.entries(headers))
    if (value !== undefined) res.setHeader(name, typeof value === 'number' ? String(value) : value);
}

function headerList(headers: OutgoingHttpHeaders): Array<[string, string]> {
  const list: Array<[string, string]> = [];
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) list.push([name, String(item)]);
  }
  return list;
}
