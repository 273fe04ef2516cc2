/**
 * @idem/idempotency/testing — the contract suite, runnable against any app that exposes an idempotent tRPC
 * mutation over HTTP, or a plain HTTP route (`protocol: 'http'`: the ./fetch and ./express adapters): every row of the status table, the in-flight and concurrency rules, the fingerprint and
 * the key's scope. `runIdempotencyConformance(target)` returns a report; `registerIdempotencyConformance(target,
 * { describe, it })` turns each check into a test of your runner.
 */
export { type ConformanceCheck, ConformanceCheckId } from './check.ts';
export { conformanceChecks } from './checks/index.ts';
export { createInProcessGate, type ExecutionGate, type InProcessGate } from './gate.ts';
export {
  type RegisterConformanceOptions,
  registerIdempotencyConformance,
  type TestRegistrar,
} from './register.ts';
export {
  type ConformanceCheckResult,
  type ConformanceReport,
  formatConformanceReport,
  planConformance,
  type RunConformanceOptions,
  runConformanceCheck,
  runIdempotencyConformance,
} from './run.ts';
export type {
  ConformanceFetch,
  ConformanceOptions,
  ConformancePrincipal,
  ConformanceResponse,
  ConformanceTarget,
} from './target.ts';
