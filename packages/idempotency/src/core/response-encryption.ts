/**
 * Stored responses private at rest: a decorator of any store that encrypts each response it stores
 * (AES-256-GCM) and decrypts each one it reads, so the key table holds ciphertext where it held a checkout's
 * emails, ids and amounts. Status and kind stay readable (the store and the admin tools use them); the body,
 * message, cause and headers travel inside the ciphertext. The record's (scope, procedure, key) is the
 * authenticated data: a ciphertext copied onto another key's row does not decrypt.
 *
 * Keys are secrets of any length (≥ 32 characters), turned into AES keys with HKDF-SHA-256; the first encrypts,
 * every one decrypts (rotation: put the new secret first, keep the old ones until their rows have expired). A
 * row names its key by an id (a hash of the derived key, never the key). Rows stored before encryption was
 * turned on are read as they are.
 */
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import { IdempotencyStoreSetupError } from './errors.ts';
import { type IdempotencyRecord, type RecordKey, recordKeyId, type StoredResponse } from './record.ts';
import type { IdempotencyStore } from './store.ts';

export interface ResponseEncryptionOptions {
  /** Secrets (≥ 32 characters each): the first encrypts new responses, every one decrypts. */
  secrets: readonly [string, ...string[]];
}

/** The prefix of an encrypted body: `idem-enc:v1:<key id>:<iv>:<ciphertext>:<tag>` (base64url parts). */
export const ENCRYPTED_BODY_PREFIX = 'idem-enc:v1:';
const MIN_SECRET_LENGTH = 32;

interface DerivedKey {
  id: string;
  key: Buffer;
}

function derive(secret: string): DerivedKey {
  if (secret.length < MIN_SECRET_LENGTH)
    throw new IdempotencyStoreSetupError(
      `A response encryption secret must be at least ${MIN_SECRET_LENGTH} characters.`,
    );
  const key = Buffer.from(hkdfSync('sha256', secret, 'idem stored response', 'aes-256-gcm', 32));
  return { id: createHash('sha256').update(key).digest('base64url').slice(0, 12), key };
}

/** The response as stored: kind and status in clear, everything else sealed. */
function seal(response: StoredResponse, on: RecordKey, current: DerivedKey): StoredResponse {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', current.key, iv);
  cipher.setAAD(Buffer.from(recordKeyId(on)));
  const sealed = Buffer.concat([cipher.update(JSON.stringify(response), 'utf8'), cipher.final()]);
  const body = [current.id, iv, sealed, cipher.getAuthTag()]
    .map((part) => (typeof part === 'string' ? part : part.toString('base64url')))
    .join(':');
  const envelope = `${ENCRYPTED_BODY_PREFIX}${body}`;
  return response.kind === 'output'
    ? { kind: 'output', httpStatus: response.httpStatus, body: envelope }
    : { kind: 'error', httpStatus: response.httpStatus, code: response.code, message: '', body: envelope };
}

function open(response: StoredResponse, on: RecordKey, keys: ReadonlyMap<string, Buffer>): StoredResponse {
  const { body } = response;
  if (body === undefined || !body.startsWith(ENCRYPTED_BODY_PREFIX)) return response;
  const [id = '', iv = '', sealed = '', tag = ''] = body.slice(ENCRYPTED_BODY_PREFIX.length).split(':');
  const key = keys.get(id);
  if (!key)
    throw new IdempotencyStoreSetupError(
      `A stored response is encrypted with key ${id}, which is not among the configured secrets.`,
    );
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  decipher.setAAD(Buffer.from(recordKeyId(on)));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  const plain = Buffer.concat([decipher.update(Buffer.from(sealed, 'base64url')), decipher.final()]);
  return JSON.parse(plain.toString('utf8')) as StoredResponse;
}

/** `store`, storing every response encrypted; every other member is the store's own. */
export function encryptStoredResponses<TTx>(
  store: IdempotencyStore<TTx>,
  options: ResponseEncryptionOptions,
): IdempotencyStore<TTx> {
  const derived = options.secrets.map(derive);
  const current = derived[0] as DerivedKey;
  const keys = new Map(derived.map(({ id, key }) => [id, key]));
  const opened = (record: IdempotencyRecord): IdempotencyRecord =>
    record.response ? { ...record, response: open(record.response, record, keys) } : record;
  return {
    ...store,
    async claim(request, tx) {
      const stored = request.response
        ? { ...request, response: seal(request.response, request, current) }
        : request;
      const claim = await store.claim(stored, tx);
      return claim.claimed ? claim : { claimed: false, record: opened(claim.record) };
    },
    complete(key, owner, response, tx) {
      return store.complete(key, owner, seal(response, key, current), tx);
    },
    async find(key) {
      const record = await store.find(key);
      return record ? opened(record) : null;
    },
  };
}
