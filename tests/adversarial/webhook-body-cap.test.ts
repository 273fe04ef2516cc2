/**
 * Issue 12, item 3c: the webhook receiver read the whole body — any size, unauthenticated — before it checked
 * the signature. It now reads at most 64 KiB (declared by Content-Length, or counted while the body streams):
 * past that, 413, and the body is neither parsed nor verified.
 *
 * Control: the same receiver with the cap lifted by the test (`maxBodyBytes: Infinity`) pulls every byte.
 */
import { describe, expect, it, vi } from 'vitest';
import { POST } from '~/app/api/webhooks/provider/route';
import { receiveProviderWebhook } from '~/server/webhooks/receive-provider-webhook';

const MiB = 1024 * 1024;
const CHUNK = 64 * 1024;

/** A streamed body of `total` bytes that counts how much of it the receiver pulled. */
function streamedBody(total: number) {
  const counter = { pulled: 0 };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (counter.pulled >= total) {
        controller.close();
        return;
      }
      const size = Math.min(CHUNK, total - counter.pulled);
      counter.pulled += size;
      controller.enqueue(new Uint8Array(size).fill(0x20)); // spaces: valid JSON padding
    },
  });
  return { stream, counter };
}

function webhookRequest(body: ReadableStream<Uint8Array>, headers: Record<string, string> = {}) {
  return new Request('http://localhost/api/webhooks/provider', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idem-signature': 't=1,v1=00', ...headers },
    body,
    duplex: 'half',
  } as RequestInit);
}

describe('an 8 MiB unsigned webhook body', () => {
  it('control: without the cap the receiver reads all of it before rejecting the signature', async () => {
    const { stream, counter } = streamedBody(8 * MiB);
    const apply = vi.fn();
    const response = await receiveProviderWebhook(webhookRequest(stream), {
      secret: 'whsec_test_idem',
      apply,
      maxBodyBytes: Number.POSITIVE_INFINITY,
    });
    console.log(`[3c control] no cap: ${counter.pulled} bytes read, then HTTP ${response.status}`);
    expect(response.status).toBe(400);
    expect(counter.pulled).toBe(8 * MiB);
    expect(apply).not.toHaveBeenCalled();
  });

  it('protected: chunked (no Content-Length) → 413 after the cap plus two chunks (one read ahead), nothing applied', async () => {
    const { stream, counter } = streamedBody(8 * MiB);
    const response = await POST(webhookRequest(stream));
    console.log(`[3c protected] chunked: ${counter.pulled} bytes read, HTTP ${response.status}`);
    expect(response.status).toBe(413);
    expect(await response.json()).toEqual({ error: 'The request body is larger than 65536 bytes.' });
    expect(counter.pulled).toBeLessThanOrEqual(64 * 1024 + 2 * CHUNK);
  });

  it('protected: a declared Content-Length over the cap → 413 before a byte is read', async () => {
    const { stream, counter } = streamedBody(8 * MiB);
    const response = await POST(webhookRequest(stream, { 'content-length': String(8 * MiB) }));
    expect(response.status).toBe(413);
    // The stream's first chunk may be buffered ahead by the runtime; the receiver itself reads none of it.
    expect(counter.pulled).toBeLessThanOrEqual(2 * CHUNK);
  });

  it('a body at the cap is still read and judged on its signature', async () => {
    const { stream, counter } = streamedBody(64 * 1024);
    const response = await POST(webhookRequest(stream));
    expect(counter.pulled).toBe(64 * 1024);
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: expect.stringContaining('Invalid signature') });
  });
});
