// What every family of attacks shares: the demo people, their calls, and an attack's and a control's row.
import type { Resource } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import { demoEmail } from '../../src/provision/demo';
import {
  type Answer,
  type AttackContext,
  answerOf,
  describe,
  entriesOf,
  medplumCall,
  message,
  type Person,
  PUBLIC_URL,
  REFUSED,
  REJECTED,
  row,
  signIn,
} from './common';

/** The demo people, each signed in through Medplum's login (a row when one cannot), and the journey patient. */
export async function signInDemoPeople(ctx: AttackContext): Promise<Map<string, Person>> {
  const { baseUrl, projectId, progress } = ctx;
  const people = new Map<string, Person>();
  for (const [key, who, email] of [
    ['alice', 'alice (Northwind patient)', demoEmail('alice', 'northwind')],
    ['bob', 'bob (Northwind patient)', demoEmail('bob', 'northwind')],
    ['carol', 'carol (Southridge patient)', demoEmail('carol', 'southridge')],
    ['northwind-clinician', 'the Northwind clinician', demoEmail('clinician', 'northwind')],
    ['southridge-clinician', 'the Southridge clinician', demoEmail('clinician', 'southridge')],
  ] as const) {
    try {
      people.set(key, await signIn(baseUrl, projectId, who, email));
    } catch (err) {
      row(`sign-in: ${who}`, 'FAILED', message(err));
    }
  }
  if (progress.token && progress.patient) {
    people.set('maya', { who: 'the journey patient', token: progress.token, profile: progress.patient });
  }
  return people;
}

/** Calls as a person (on Medplum, through the gateway), an attack's and a control's row, a resource by its tag. */
export function attackKit(ctx: AttackContext, people: Map<string, Person>) {
  const { baseUrl } = ctx;
  const direct = (person: Person, method: string, path: string, body?: unknown) =>
    medplumCall(baseUrl, person.token, method, `fhir/R4/${path}`, { body });
  const gateway = async (person: Person, path: string) =>
    answerOf(await ctx.gatewayFetch(`${PUBLIC_URL}${path}`, { headers: { authorization: `Bearer ${person.token}` } }));
  const viaGateway = (person: Person, path: string) => gateway(person, `/v1/fhir/${path}`);

  /**
   * One attack: `attacker` does `call`; held when Medplum (or the gateway) refuses it (403/404), or, for a
   * search, when nothing of `forbidden` comes back, or, for a write a writeConstraint or the validator
   * must stop (`rejected`), when it answers 400/403. `needs.missing` says why a target may be absent.
   */
  const attack = async (
    what: string,
    needs: { attacker?: string; target?: string; missing?: string },
    call: (attacker: Person, target: string) => Promise<Answer>,
    expect: 'refused' | 'nothing' | 'rejected' = 'refused',
  ): Promise<void> => {
    const attacker = needs.attacker ? people.get(needs.attacker) : undefined;
    if (!attacker || !needs.target) {
      row(
        `attack: ${what}`,
        'not reached',
        !attacker ? 'the attacker could not sign in' : (needs.missing ?? 'the journey did not make it'),
      );
      return;
    }
    try {
      const answer = await call(attacker, needs.target);
      const targetId = needs.target.split('/').pop() as string;
      const leaked =
        expect === 'nothing' && answer.status === 200 && entriesOf(answer.body).some((r) => r.id === targetId);
      const held =
        (expect === 'rejected' ? REJECTED : REFUSED).includes(answer.status) ||
        (expect === 'nothing' && answer.status === 200 && !leaked);
      const expected = { refused: '403/404', nothing: 'nothing of it', rejected: '403/400' }[expect];
      row(`attack: ${what}`, held ? 'held' : 'FAILED', `expected ${expected}, got ${describe(answer)}`);
    } catch (err) {
      row(`attack: ${what}`, 'FAILED', `the call threw: ${message(err)}`);
    }
  };
  /** What must still work, so that the attacks' refusals are refusals of something real. */
  const control = async (
    what: string,
    person: Person | undefined,
    target: string | undefined,
    call: () => Promise<Answer>,
    expected: { status?: number; missing?: string } = {},
  ): Promise<Answer | undefined> => {
    if (!person || !target) {
      row(`control: ${what}`, 'not reached', !person ? 'could not sign in' : (expected.missing ?? 'nothing to read'));
      return undefined;
    }
    const status = expected.status ?? 200;
    try {
      const answer = await call();
      row(
        `control: ${what}`,
        answer.status === status ? 'ok' : 'FAILED',
        `expected ${status}, got ${describe(answer)}`,
      );
      return answer;
    } catch (err) {
      row(`control: ${what}`, 'FAILED', `the call threw: ${message(err)}`);
      return undefined;
    }
  };
  const byTag = async (type: string, key: string): Promise<Resource | undefined> =>
    entriesOf(
      (await ctx.adminGet(`fhir/R4/${type}?_tag=${encodeURIComponent(`${SYSTEMS.provisioning}|${key}`)}`)).body,
    )[0];
  return { people, direct, gateway, viaGateway, attack, control, byTag };
}

export type AttackKit = ReturnType<typeof attackKit>;
