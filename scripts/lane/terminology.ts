// Terminology and catalogs: FHIR's ValueSets a clinician expands, her tenant's catalog and not the other's.
import type { ValueSet, ValueSetExpansionContains } from '@medplum/fhirtypes';
import type { AttackKit } from './attack-kit';
import {
  type Answer,
  type AttackContext,
  describe,
  entriesOf,
  medplumCall,
  message,
  type Person,
  REFUSED,
  row,
} from './common';

/** The Northwind clinician's and bob's expansions and CodeSystem searches, each judged on what came back. */
export async function terminology(ctx: AttackContext, kit: AttackKit): Promise<void> {
  const { baseUrl } = ctx;
  const { people, direct, byTag } = kit;
  const clinician = people.get('northwind-clinician');
  // Terminology: the clinician policy reads, read-only, the ValueSets and CodeSystems Medplum
  // keeps in its R4 project (MEDPLUM_R4_PROJECT), so that Medplum's app can `ValueSet/$expand` a coded
  // field's binding; her own tenant's catalog stays hers (catalogReads), the other tenant's out of reach,
  // and a patient gains nothing of FHIR's own terminology.
  const TASK_STATUS_VS = 'http://hl7.org/fhir/ValueSet/task-status';
  const TASK_STATUS_CS = 'http://hl7.org/fhir/task-status';
  const expand = (person: Person, url: string, filter?: string) =>
    direct(
      person,
      'GET',
      `ValueSet/$expand?url=${encodeURIComponent(url)}${filter ? `&filter=${encodeURIComponent(filter)}` : ''}`,
    );
  /** The codes of an expansion, nested `contains` included. */
  const codesOf = (answer: Answer): string[] => {
    const codes: string[] = [];
    const walk = (list: ValueSetExpansionContains[] | undefined) => {
      for (const c of list ?? []) {
        if (c.code) {
          codes.push(c.code);
        }
        walk(c.contains);
      }
    };
    const body = answer.body as ValueSet | undefined;
    if (answer.status === 200 && body?.resourceType === 'ValueSet') {
      walk(body.expansion?.contains);
    }
    return codes;
  };
  /** An expansion in a few words: its total and its codes; anything else as `describe` says it. */
  const expansion = (answer: Answer): string => {
    const body = answer.body as ValueSet | undefined;
    if (answer.status !== 200 || body?.resourceType !== 'ValueSet') {
      return describe(answer);
    }
    const codes = codesOf(answer);
    const total = body.expansion?.total === undefined ? '' : `, total ${body.expansion.total}`;
    return `200, an expansion of ${codes.length} code(s)${total}: ${codes.slice(0, 15).join(', ') || 'none'}${codes.length > 15 ? ', …' : ''}`;
  };
  /** A row judged on what came back (not only its status): `judge` says whether it is as it must be. */
  const judged = async (
    kind: 'control' | 'attack',
    what: string,
    person: Person | undefined,
    call: (person: Person) => Promise<Answer>,
    expected: string,
    judge: (answer: Answer) => boolean | Promise<boolean>,
    note: (answer: Answer, pass: boolean) => string | Promise<string> = () => '',
  ): Promise<void> => {
    if (!person) {
      row(`${kind}: ${what}`, 'not reached', 'could not sign in');
      return;
    }
    try {
      const answer = await call(person);
      const pass = await judge(answer);
      const good = kind === 'control' ? 'ok' : 'held';
      row(
        `${kind}: ${what}`,
        pass ? good : 'FAILED',
        `expected ${expected}, got ${expansion(answer)}${await note(answer, pass)}`,
      );
    } catch (err) {
      row(`${kind}: ${what}`, 'FAILED', `the call threw: ${message(err)}`);
    }
  };
  const hasAll = (answer: Answer, codes: string[]) => codes.every((c) => codesOf(answer).includes(c));
  await judged(
    'control',
    `the Northwind clinician expands FHIR's ${TASK_STATUS_VS} (ValueSet/$expand)`,
    clinician,
    (p) => expand(p, TASK_STATUS_VS),
    '200 with ready, in-progress, completed',
    (a) => hasAll(a, ['ready', 'in-progress', 'completed']),
  );
  await judged(
    'control',
    `the Northwind clinician expands ${TASK_STATUS_VS} with filter=prog`,
    clinician,
    (p) => expand(p, TASK_STATUS_VS, 'prog'),
    '200 with in-progress',
    (a) => hasAll(a, ['in-progress']),
  );
  // The tenants' condition catalogs (src/provision/catalog.ts conditionCatalog), found by provisioning tag.
  const northwindCatalog = (await byTag('ValueSet', 'catalog-northwind-conditions')) as ValueSet | undefined;
  const southridgeCatalog = (await byTag('ValueSet', 'catalog-southridge-conditions')) as ValueSet | undefined;
  if (northwindCatalog?.url) {
    const url = northwindCatalog.url;
    // Medplum checks a ValueSet's listed codes against their code system (expand.ts computeExpansion):
    // provisioning writes the catalogs' ICD-10-CM codes as a CodeSystem (catalog.ts catalogCodeSystem,
    // content `example`), which the clinician policy reads (catalogReads('CodeSystem')).
    await judged(
      'control',
      `the Northwind clinician expands her tenant's condition catalog (${url}, version ${northwindCatalog.version})`,
      clinician,
      (p) => expand(p, url),
      '200 with I10',
      (a) => a.status === 200 && hasAll(a, ['I10']),
      // Whether a refusal is the policy's: the project admin's answer to the same expansion.
      async (_a, pass) =>
        pass
          ? ''
          : `; the project admin's same expansion: ${expansion(await medplumCall(baseUrl, ctx.adminToken, 'GET', `fhir/R4/ValueSet/$expand?url=${encodeURIComponent(url)}`, { waitOutQuota: true }))}`,
    );
  } else {
    row(
      "control: the Northwind clinician expands her tenant's condition catalog",
      'not reached',
      'no ValueSet tagged catalog-northwind-conditions',
    );
  }
  if (southridgeCatalog?.url) {
    const url = southridgeCatalog.url;
    await judged(
      'attack',
      `the Northwind clinician expands the Southridge condition catalog (${url})`,
      clinician,
      (p) => expand(p, url),
      '400/403/404, or no codes',
      (a) => [400, 403, 404].includes(a.status) || (a.status >= 200 && a.status < 300 && codesOf(a).length === 0),
    );
  } else {
    row(
      'attack: the Northwind clinician expands the Southridge condition catalog',
      'not reached',
      'no ValueSet tagged catalog-southridge-conditions',
    );
  }
  const patientTerm = people.get('bob');
  await judged(
    'attack',
    `bob (Northwind patient) expands FHIR's ${TASK_STATUS_VS}`,
    patientTerm,
    (p) => expand(p, TASK_STATUS_VS),
    'not 2xx, or no codes',
    (a) => a.status < 200 || a.status >= 300 || codesOf(a).length === 0,
  );
  await judged(
    'attack',
    `bob (Northwind patient) searches FHIR's CodeSystem?url=${TASK_STATUS_CS}`,
    patientTerm,
    (p) => direct(p, 'GET', `CodeSystem?url=${encodeURIComponent(TASK_STATUS_CS)}`),
    '403/404, or an empty Bundle',
    (a) => REFUSED.includes(a.status) || (a.status === 200 && entriesOf(a.body).length === 0),
  );
  await judged(
    'control',
    `the Northwind clinician searches FHIR's CodeSystem?url=${TASK_STATUS_CS}`,
    clinician,
    (p) => direct(p, 'GET', `CodeSystem?url=${encodeURIComponent(TASK_STATUS_CS)}`),
    '200, a Bundle of 1',
    (a) => a.status === 200 && entriesOf(a.body).length === 1,
  );
}
