// Another patient's record and the other tenant's clinician: the journey patient's document, Patient and data.
import type { Bundle } from '@medplum/fhirtypes';
import type { AttackKit } from './attack-kit';
import { type AttackContext, describe, entriesOf, message, type Person, row } from './common';

/** Her own document and count (controls), then her record read by other patients and the other tenant's clinician. */
export async function recordReads(ctx: AttackContext, kit: AttackKit): Promise<void> {
  const { progress } = ctx;
  const { people, direct, gateway, viaGateway, attack, control } = kit;
  const binary = progress.document; // Binary/<id>
  const patient = progress.patient;
  const response = progress.questionnaireResponse || undefined;
  const observation = patient
    ? entriesOf((await ctx.adminGet(`fhir/R4/Observation?subject=${patient}&_count=1`)).body)[0]
    : undefined;
  const observationRef = observation ? `Observation/${observation.id}` : undefined;
  const maya = people.get('maya');
  // The journey patient's uploaded document (Binary.securityContext = her Patient): hers through
  // GET /v1/documents/{id}; on Medplum no patient reads a Binary by id, nor another tenant's clinician
  // (Medplum >= 5.1.18 checks its context); her tenant's clinicians do (evidence.ts).
  const documentPath = `/v1/documents/${binary?.split('/')[1]}`;
  await control('the journey patient reads her own document through GET /v1/documents/{id}', maya, binary, () =>
    gateway(maya as Person, documentPath),
  );
  // The record plane honours `_summary=count` (fb45500): no page size of the gateway's own after it, which
  // Medplum would read as a request for a page.
  const countStep =
    'control: the journey patient counts her Patient through the gateway (GET /v1/fhir/Patient?_summary=count): total 1, no entries';
  if (!maya) {
    row(countStep, 'not reached', 'the journey did not make it');
  } else {
    try {
      const counted = await viaGateway(maya, 'Patient?_summary=count');
      const bundle = counted.body as Bundle | undefined;
      const entries = bundle?.entry?.length ?? 0;
      const good = counted.status === 200 && bundle?.resourceType === 'Bundle' && bundle.total === 1 && entries === 0;
      row(
        countStep,
        good ? 'ok' : 'FAILED',
        `expected 200, a Bundle with total 1 and no entry; got ${describe(counted)}${bundle?.resourceType === 'Bundle' ? `, type ${bundle.type}, total ${bundle.total ?? 'absent'}, ${entries} entr${entries === 1 ? 'y' : 'ies'}` : ''}`,
      );
    } catch (err) {
      row(countStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  for (const attacker of ['bob', 'carol']) {
    const who = people.get(attacker)?.who ?? attacker;
    await attack(`${who} reads the journey patient's uploaded Binary directly`, { attacker, target: binary }, (a, t) =>
      direct(a, 'GET', t),
    );
    await attack(
      `${who} reads the journey patient's uploaded Binary through GET /v1/fhir/Binary/{id}`,
      { attacker, target: binary },
      (a, t) => viaGateway(a, t),
    );
    await attack(
      `${who} reads the journey patient's document through GET /v1/documents/{id}`,
      { attacker, target: binary },
      (a) => gateway(a, documentPath),
    );
  }
  await attack(
    "the Southridge clinician reads the journey patient's uploaded Binary directly",
    { attacker: 'southridge-clinician', target: binary },
    (a, t) => direct(a, 'GET', t),
  );

  // Another patient's record.
  for (const [attacker, target, label] of [
    ['bob', patient, "the journey patient's Patient"],
    ['carol', patient, "the journey patient's Patient"],
    ['bob', response, "the journey patient's QuestionnaireResponse"],
    ['carol', response, "the journey patient's QuestionnaireResponse"],
    ['bob', observationRef, "the journey patient's Observation"],
    ['carol', observationRef, "the journey patient's Observation"],
  ] as const) {
    const who = people.get(attacker)?.who ?? attacker;
    await attack(`${who} reads ${label} directly`, { attacker, target }, (a, t) => direct(a, 'GET', t));
    await attack(`${who} reads ${label} through the gateway`, { attacker, target }, (a, t) => viaGateway(a, t));
  }
  const alice = people.get('alice');
  const aliceWeight = alice
    ? entriesOf((await ctx.adminGet(`fhir/R4/Observation?subject=${alice.profile}&_count=1`)).body)[0]
    : undefined;
  await attack(
    "bob (Northwind patient) reads alice's Patient directly",
    { attacker: 'bob', target: alice?.profile },
    (a, t) => direct(a, 'GET', t),
  );
  await attack(
    "bob (Northwind patient) searches alice's Observations (Observation?subject=)",
    { attacker: 'bob', target: aliceWeight ? `Observation/${aliceWeight.id}` : undefined },
    (a) => direct(a, 'GET', `Observation?subject=${alice?.profile}`),
    'nothing',
  );
  await attack(
    "carol (Southridge patient) reads alice's body-weight Observation directly",
    { attacker: 'carol', target: aliceWeight ? `Observation/${aliceWeight.id}` : undefined },
    (a, t) => direct(a, 'GET', t),
  );

  // A clinician of the other tenant.
  await control(
    'the Northwind clinician reads the journey patient (her tenant)',
    people.get('northwind-clinician'),
    patient,
    () => direct(people.get('northwind-clinician') as Person, 'GET', patient as string),
  );
  await attack(
    'the Southridge clinician reads the journey patient directly',
    { attacker: 'southridge-clinician', target: patient },
    (a, t) => direct(a, 'GET', t),
  );
  await attack(
    'the Southridge clinician searches the journey patient (Patient?_id=)',
    { attacker: 'southridge-clinician', target: patient },
    (a, t) => direct(a, 'GET', `Patient?_id=${t.split('/')[1]}`),
    'nothing',
  );
  await attack(
    "the Southridge clinician searches the journey patient's Observations",
    { attacker: 'southridge-clinician', target: observationRef },
    () => direct(people.get('southridge-clinician') as Person, 'GET', `Observation?subject=${patient}`),
    'nothing',
  );
}
