/**
 * The requests and responses the store tests claim with: one procedure, two fingerprints (the same request and
 * another one), a success response, and a claim request with a fresh scope, key and owner each time. Shared by
 * the store contract (store-contract.ts) and each engine's own store tests.
 */
import { randomUUID } from 'node:crypto';
import {
  type ClaimRequest,
  fingerprintRequest,
  type RecordKey,
  type StoredResponse,
} from '../../src/index.ts';
import { uniqueScope } from './db.ts';

export const procedure = 'orders.place';
export const fingerprintA = fingerprintRequest(procedure, { a: 1 });
export const fingerprintB = fingerprintRequest(procedure, { a: 2 });
export const output: StoredResponse = { kind: 'output', httpStatus: 200, body: '{"json":{"id":1}}' };

/** A first request of a new key in a scope of its own: 30 s lease, 1 h retention. */
export function claimRequest(overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return {
    scope: uniqueScope(),
    procedure,
    key: randomUUID(),
    fingerprint: fingerprintA,
    owner: randomUUID(),
    leaseSeconds: 30,
    retentionSeconds: 3_600,
    ...overrides,
  };
}

/** The record key of a request (without its fingerprint, owner, …). */
export const keyOf = ({ scope, procedure, key }: RecordKey): RecordKey => ({ scope, procedure, key });
