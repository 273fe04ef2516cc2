/** (a) No idempotency at all: node:http, the handler, JSON. The floor the node:http peers are compared with. */
import { createServer } from 'node:http';
import { parseInput, runEffect } from '../effect.ts';
import { parseJson, readBody, sendJson } from '../http.ts';
import type { StartServer } from './types.ts';

export const startNone: StartServer = async ({ db }) => {
  const server = createServer((request, response) => {
    void (async () => {
      if (request.method !== 'POST' || request.url !== '/effect')
        return sendJson(response, 404, '{"error":"not found"}');
      const input = parseInput(parseJson(await readBody(request)));
      if (!input) return sendJson(response, 400, '{"error":"body must be {\\"n\\": <int>}"}');
      try {
        sendJson(response, 200, JSON.stringify(await runEffect(db, input.n)));
      } catch {
        sendJson(response, 500, '{"error":"handler failed"}');
      }
    })();
  });
  return { server, close: async () => {} };
};
