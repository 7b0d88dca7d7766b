// Self-registration and sign-in as a patient app does them, and where a registered patient ends up.
import { createHash, randomBytes } from 'node:crypto';
import type { ClientApplication, Patient, Reference, Resource } from '@medplum/fhirtypes';
import { EXTENSIONS, TENANT_PARAMETER } from '../../contracts/systems';
import { storedResource, storedResources } from './attack-store';
import type { TestBackend } from './backend';

async function authPost(backend: TestBackend, path: string, body: Record<string, string>, form = false) {
  const response = await backend.fetch(new URL(path, backend.baseUrl), {
    method: 'POST',
    headers: { 'content-type': form ? 'application/x-www-form-urlencoded' : 'application/json' },
    body: form ? new URLSearchParams(body).toString() : JSON.stringify(body),
  });
  const json = (await response.json()) as Record<string, unknown>;
  if (response.status !== 200) {
    throw new Error(`${path} answered ${response.status}: ${JSON.stringify(json)}`);
  }
  return json;
}

/** Exchanges a code for tokens with PKCE; the token and the patient it names. */
async function redeem(backend: TestBackend, code: string, verifier: string) {
  const tokens = await authPost(
    backend,
    'oauth2/token',
    { grant_type: 'authorization_code', code, code_verifier: verifier },
    true,
  );
  const profile = (tokens.profile as { reference: string }).reference;
  return { token: tokens.access_token as string, patientId: profile.split('/')[1] };
}

function pkce() {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

const REGISTRANT_PASSWORD = 'correct horse battery staple';

/** `/auth/newuser` -> `/auth/newpatient` -> code -> token, through the given app (client id). */
export async function registerPatient(
  backend: TestBackend,
  email: string,
  clientId: string,
): Promise<{ token: string; patientId: string }> {
  const { verifier, challenge } = pkce();
  const user = await authPost(backend, 'auth/newuser', {
    firstName: 'Rita',
    lastName: 'Registrant',
    email,
    password: REGISTRANT_PASSWORD,
    projectId: backend.project.id,
    clientId,
    codeChallenge: challenge,
    codeChallengeMethod: 'S256',
  });
  const patient = await authPost(backend, 'auth/newpatient', {
    login: user.login as string,
    projectId: backend.project.id,
  });
  return redeem(backend, patient.code as string, verifier);
}

/** A later sign-in (`/auth/login`) of a registered patient, through any app they choose. */
export async function signIn(
  backend: TestBackend,
  email: string,
  clientId: string,
): Promise<{ token: string; patientId: string }> {
  const { verifier, challenge } = pkce();
  const login = await authPost(backend, 'auth/login', {
    email,
    password: REGISTRANT_PASSWORD,
    projectId: backend.project.id,
    clientId,
    codeChallenge: challenge,
    codeChallengeMethod: 'S256',
  });
  return redeem(backend, login.code as string, verifier);
}

/** The tenant app of a demo tenant (its ClientApplication id). */
export function tenantApp(backend: TestBackend, organization: string): string {
  const app = (storedResources(backend, 'ClientApplication') as ClientApplication[]).find(
    (a) =>
      a.extension?.find((e) => e.url === EXTENSIONS.tenantOrganization)?.valueReference?.reference === organization,
  );
  if (!app?.id) {
    throw new Error(`no tenant app for ${organization}`);
  }
  return app.id;
}

/** The tenant parameter a membership carries (what decides a patient's tenant in every policy). */
function membershipTenant(resource: Resource | undefined): string | undefined {
  const access = (resource as { access?: { parameter?: { name?: string; valueReference?: Reference }[] }[] })?.access;
  return access?.flatMap((a) => a.parameter ?? []).find((p) => p.name === TENANT_PARAMETER)?.valueReference?.reference;
}

/** Where a patient is: their Patient's managing organization and accounts, and their membership's tenant. */
export async function whereIs(
  backend: TestBackend,
  patientId: string,
): Promise<{ managingOrganization?: string; accounts: string[]; membership?: string }> {
  const patient = storedResource(backend, 'Patient', patientId) as Patient | undefined;
  const membership = await backend.systemRepo.searchOne({
    resourceType: 'ProjectMembership',
    filters: [{ code: 'profile', operator: 'eq', value: `Patient/${patientId}` }],
  });
  return {
    managingOrganization: patient?.managingOrganization?.reference,
    accounts: (patient?.meta?.accounts ?? []).map((a) => a.reference ?? ''),
    membership: membershipTenant(membership),
  };
}
