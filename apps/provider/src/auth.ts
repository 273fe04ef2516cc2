/** `Authorization: Bearer <secret key>` on every /v1 route, as Stripe does. */
import { createHash, timingSafeEqual } from 'node:crypto';
import { ApiError } from './errors.ts';

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

function unauthorized(message: string): ApiError {
  return new ApiError(
    401,
    'invalid_request_error',
    message,
    {},
    { 'WWW-Authenticate': 'Bearer realm="provider"' },
  );
}

/** Returns a check that throws 401 unless the header carries exactly the secret key. */
export function bearerAuth(secretKey: string): (header: string | undefined) => void {
  const expected = digest(secretKey);
  return (header) => {
    const match = header === undefined ? null : /^Bearer[ ]+(\S+)\s*$/i.exec(header);
    const token = match?.[1];
    if (token === undefined) {
      throw unauthorized(
        'You did not provide an API key. Provide it in the Authorization header: "Authorization: Bearer YOUR_SECRET_KEY".',
      );
    }
    // Compare fixed-length digests in constant time, so response timing does not leak the key's prefix.
    if (!timingSafeEqual(digest(token), expected)) {
      throw unauthorized('Invalid API Key provided.');
    }
  };
}
