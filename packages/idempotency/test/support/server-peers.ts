/**
 * The server peers (tRPC, superjson) that tests outside this package (tests/adversarial) build their routers
 * and requests with: the root workspace does not depend on them itself, this package does.
 */
export { initTRPC, TRPCError } from '@trpc/server';
export { fetchRequestHandler } from '@trpc/server/adapters/fetch';
export { default as superjson } from 'superjson';
