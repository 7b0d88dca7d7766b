import type { WithId } from '@medplum/core';
import type { JsonWebKey as JsonWebKeyResource } from '@medplum/fhirtypes';
import type { JWK } from 'jose';
import { exportJWK, generateKeyPair, importJWK } from 'jose';
import type { SqliteRepository } from '../store/repo';

export interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  publicJwk: JWK;
}

const ALG = 'RS256';

/**
 * The server's RS256 signing key, kept like Medplum keeps it: a `JsonWebKey` resource (a protected
 * type only the system can read), so tokens stay valid across restarts of a file-backed store.
 */
export async function loadOrCreateSigningKey(systemRepo: SqliteRepository): Promise<SigningKey> {
  const existing = await systemRepo.searchOne<JsonWebKeyResource>({
    resourceType: 'JsonWebKey',
    filters: [{ code: 'active', operator: 'eq', value: 'true' }],
  });
  if (existing) {
    return fromResource(existing);
  }
  const { privateKey } = await generateKeyPair(ALG, { extractable: true, modulusLength: 2048 });
  const jwk = await exportJWK(privateKey);
  const saved = await systemRepo.createResource<JsonWebKeyResource>({
    resourceType: 'JsonWebKey',
    active: true,
    alg: ALG,
    kty: jwk.kty,
    use: 'sig',
    n: jwk.n,
    e: jwk.e,
    d: jwk.d,
    p: jwk.p,
    q: jwk.q,
    dp: jwk.dp,
    dq: jwk.dq,
    qi: jwk.qi,
  });
  return fromResource(saved);
}

async function fromResource(resource: WithId<JsonWebKeyResource>): Promise<SigningKey> {
  const { n, e, d, p, q, dp, dq, qi } = resource;
  const privateKey = (await importJWK({ kty: 'RSA', n, e, d, p, q, dp, dq, qi }, ALG)) as CryptoKey;
  const publicJwk: JWK = { kty: 'RSA', n, e, alg: ALG, use: 'sig', kid: resource.id };
  const publicKey = (await importJWK(publicJwk, ALG)) as CryptoKey;
  return { kid: resource.id, privateKey, publicKey, publicJwk };
}

export function jwks(key: SigningKey): { keys: JWK[] } {
  return { keys: [key.publicJwk] };
}
