import { configRoute } from '../../contracts/patient';
import type { App, AppDeps } from '../app-env';

export function registerConfigRoutes(app: App, deps: AppDeps): void {
  app.openapi(configRoute, (c) =>
    c.json(
      {
        projectId: deps.projectId,
        medplumBaseUrl: deps.issuer,
        registration: {
          steps: [
            'POST {medplumBaseUrl}auth/newuser {firstName, lastName, email, password, projectId, clientId, codeChallenge, codeChallengeMethod: "S256"} -> {login}',
            'POST {medplumBaseUrl}auth/newpatient {login, projectId} -> {code}',
            'POST {medplumBaseUrl}oauth2/token grant_type=authorization_code&code&code_verifier -> {access_token}',
            'POST /v1/patient/home (once)',
            'PUT /v1/fhir/Patient/{id} with address [{country, state}] (ISO 3166-1 country such as "US", state such as "CA"): the catalog, the agreements and availability depend on where she lives; until then GET /v1/protocols withholds offerings limited to an area (`incomplete`) and GET /v1/availability is 409',
          ],
        },
        signIn: {
          steps: [
            'POST {medplumBaseUrl}auth/login {email, password, projectId, clientId, codeChallenge, codeChallengeMethod: "S256"} -> {code}',
            'POST {medplumBaseUrl}oauth2/token grant_type=authorization_code&code&code_verifier -> {access_token, refresh_token?}',
            'GET /v1/patient/profile (the session check)',
          ],
        },
      },
      200,
    ),
  );
}
