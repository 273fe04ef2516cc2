import { servedRouter } from '~/server/test-seams';
import { createTrpcHandler } from '../handler.ts';

const handler = createTrpcHandler(servedRouter);

export { handler as GET, handler as POST };
