/**
 * The web process's OpenTelemetry SDK (server/observability/otel-sdk.ts), as `OTEL_EXPORTER_OTLP_ENDPOINT` starts
 * it: its spans reach an OTLP/HTTP collector — here a loopback server that keeps what it is sent. CONTROL: before
 * the SDK starts, the same request's span is not recording, and nothing is sent.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { context, propagation, trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTracingSdk, type TracingSdk } from '~/server/observability/otel-sdk';
import { traceRequest } from '~/server/observability/tracing';

const received: Array<{ path: string; body: string }> = [];
let collector: Server;
let endpoint: string;
let sdk: TracingSdk | undefined;

beforeAll(async () => {
  collector = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => {
      body += chunk.toString('utf8');
    });
    request.on('end', () => {
      received.push({ path: request.url ?? '', body });
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await sdk?.shutdown();
  trace.disable();
  context.disable();
  propagation.disable();
  await new Promise((resolve) => collector.close(resolve));
});

const request = () => new Request('http://checkout.test/api/trpc/checkout.placeOrder', { method: 'POST' });

describe('the OTLP export', () => {
  it('CONTROL: without the SDK, a request span records nothing and nothing is sent', async () => {
    let recording: boolean | undefined;
    await traceRequest(request(), async () => {
      recording = trace.getActiveSpan()?.isRecording() ?? false;
      return new Response('ok');
    });
    expect(recording).toBe(false);
    expect(received).toEqual([]);
  });

  it('with the SDK, the span reaches the collector, with the service name', async () => {
    sdk = startTracingSdk(endpoint, 'idem-web-otlp-test');
    const response = await traceRequest(request(), async () => new Response('ok', { status: 201 }));
    expect(response.status).toBe(201);
    await sdk.flush();
    const exported = received.filter((sent) => sent.path === '/v1/traces').map((sent) => sent.body);
    expect(exported.join('\n')).toContain('POST /api/trpc/checkout.placeOrder');
    expect(exported.join('\n')).toContain('idem-web-otlp-test');
  });
});
