import { appRouter } from '~/server/root';
import { createTrpcHandler } from '../handler.ts';

const handler = createTrpcHandler(appRouter);

export { handler as GET, handler as POST };
