import { servedApi } from '~/server/test-seams';
import { createTrpcHandler } from '../handler.ts';

const handler = createTrpcHandler(servedApi.router, { idempotency: servedApi.idempotency });

export { handler as GET, handler as POST };
