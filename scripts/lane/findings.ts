// MITIGATION_ONLY: the clinician's writes to a finding (DetectedIssue), which only append mitigations of her own.
import type { DetectedIssue } from '@medplum/fhirtypes';
import type { AttackKit } from './attack-kit';
import { type Answer, type AttackContext, describe, entriesOf, type Person, row } from './common';

/** A mitigation in a colleague's name (refused), her own (control), hers rewritten (refused), the finding read back. */
export async function mitigationOnly(ctx: AttackContext, kit: AttackKit): Promise<void> {
  const { progress } = ctx;
  const { people, direct, attack, control } = kit;
  const patient = progress.patient;
  // The clinician's writes the policy narrows (src/provision/definition.ts, clinician policy).
  // MITIGATION_ONLY: a finding (DetectedIssue) changes only by appending mitigations, each authored by the
  // writer herself (`%profile`); the recorded ones stay. The lane has one clinician per tenant, so "a
  // colleague" is the visit practitioner of the journey's first free slot (a practitioner of her tenant's
  // visit team), else the Southridge clinician.
  const clinician = people.get('northwind-clinician');
  const findings = patient
    ? (entriesOf((await ctx.adminGet(`fhir/R4/DetectedIssue?patient=${patient}&_count=20`)).body) as DetectedIssue[])
    : [];
  const finding =
    findings.find((f) => f.code?.coding?.some((c) => c.code === 'potassium-sparing-diuretic')) ?? findings[0];
  const findingRef = finding ? `DetectedIssue/${finding.id}` : undefined;
  const noFinding = patient
    ? 'no DetectedIssue for the journey patient (see the precondition row)'
    : 'the journey did not make it';
  const colleague = progress.practitioner ?? people.get('southridge-clinician')?.profile;
  const mitigationBy = (author: string, text: string) => ({
    action: { text },
    date: new Date().toISOString(),
    author: { reference: author },
  });
  /** The finding as the clinician reads it now, with `change` applied to its mitigations, PUT back. */
  const mitigate = async (
    person: Person,
    target: string,
    change: (recorded: NonNullable<DetectedIssue['mitigation']>) => DetectedIssue['mitigation'],
  ): Promise<Answer> => {
    const current = await direct(person, 'GET', target);
    if (current.status !== 200) {
      // Not a refusal of the write: the row is FAILED ("the call threw"), never held.
      throw new Error(`she could not read ${target} to write it: ${describe(current)}`);
    }
    const issue = current.body as DetectedIssue;
    return direct(person, 'PUT', target, { ...issue, mitigation: change(issue.mitigation ?? []) });
  };
  await attack(
    `the Northwind clinician records a mitigation in a colleague's name (author ${colleague ?? '?'}) on the journey patient's finding`,
    { attacker: 'northwind-clinician', target: colleague ? findingRef : undefined, missing: noFinding },
    (a, t) => mitigate(a, t, (recorded) => [...recorded, mitigationBy(colleague as string, 'reviewed, proceed')]),
    'rejected',
  );
  const own = await control(
    "the Northwind clinician appends a mitigation of her own to the journey patient's finding",
    clinician,
    findingRef,
    () =>
      mitigate(clinician as Person, findingRef as string, (recorded) => [
        ...recorded,
        mitigationBy((clinician as Person).profile, 'Potassium monitored (lane control)'),
      ]),
    { missing: noFinding },
  );
  const ownVersion = own?.status === 200 ? (own.body as DetectedIssue) : undefined;
  const recorded = ownVersion?.mitigation;
  await attack(
    'the Northwind clinician rewrites the mitigation she recorded (action and author changed)',
    { attacker: 'northwind-clinician', target: recorded?.length ? findingRef : undefined, missing: noFinding },
    (a, t) =>
      mitigate(a, t, (now) =>
        now.map((m, i) =>
          i === now.length - 1 ? { ...m, action: { text: 'reviewed, proceed' }, author: { reference: colleague } } : m,
        ),
      ),
    'rejected',
  );
  if (findingRef && recorded) {
    const after = (await ctx.adminGet(`fhir/R4/${findingRef}`)).body as DetectedIssue | undefined;
    const same =
      after?.meta?.versionId === ownVersion?.meta?.versionId &&
      JSON.stringify(after?.mitigation) === JSON.stringify(recorded);
    row(
      'the refused mitigation writes changed nothing',
      same ? 'ok' : 'FAILED',
      `${findingRef}: ${after?.mitigation?.length ?? 0} mitigation(s), by ${after?.mitigation?.map((m) => m.author?.reference).join(', ') || 'nobody'}; version ${after?.meta?.versionId}${same ? ", the control's" : " (NOT the control's)"}`,
    );
  }
}
