// Whom she books with: her tenant's visit team, named by her task and hers to read; not a queue nor another's.
import type { CareTeam, Task } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import type { AttackKit } from './attack-kit';
import {
  type AttackContext,
  DAY,
  describe,
  entriesOf,
  gatewayDescribe,
  message,
  type Person,
  REFUSED,
  row,
} from './common';

/** Her visit team as her task names it, read and its free slots (controls); a queue and another tenant's refused. */
export async function whomSheBooksWith(
  ctx: AttackContext,
  kit: AttackKit,
  queueRef: string | undefined,
): Promise<void> {
  const { people, direct, gateway, viaGateway, attack, control, byTag } = kit;
  const maya = people.get('maya');
  // Whom she books with: a schedule-visit task names her tenant's visit team
  // (input `care-team` under SYSTEMS.taskKind), and her policy reads her tenant's visit teams (CareTeam
  // category SYSTEMS.careTeam|visits, in her tenant), never a clinicians' work queue (SYSTEMS.careQueue)
  // nor another tenant's visit team.
  const northwindTeam = await byTag('CareTeam', 'visit-team-northwind');
  const northwindTeamRef = northwindTeam?.id ? `CareTeam/${northwindTeam.id}` : undefined;
  const teamStep =
    "control: the journey patient's schedule-visit task (GET /v1/fhir/Task?code=…|schedule-visit through the gateway) names a care-team (input 'care-team' under SYSTEMS.taskKind): her tenant's visit team";
  let visitTeam: string | undefined;
  if (!maya) {
    row(teamStep, 'not reached', 'the journey did not make it');
  } else {
    try {
      const found = await viaGateway(
        maya,
        `Task?code=${encodeURIComponent(`${SYSTEMS.taskKind}|schedule-visit`)}&_count=20`,
      );
      const tasks = entriesOf(found.body) as Task[];
      const named = tasks.map((t) => ({
        task: t,
        team: t.input?.find((i) => i.type?.coding?.some((c) => c.system === SYSTEMS.taskKind && c.code === 'care-team'))
          ?.valueReference?.reference,
      }));
      visitTeam = named.find((n) => n.team)?.team;
      const teams = [...new Set(named.map((n) => n.team ?? 'none'))];
      const stored = visitTeam
        ? ((await ctx.adminGet(`fhir/R4/${visitTeam}`)).body as CareTeam | undefined)
        : undefined;
      const categories = (stored?.category ?? []).flatMap((c) => c.coding ?? []).map((c) => `${c.system}|${c.code}`);
      const good =
        found.status === 200 &&
        tasks.length > 0 &&
        named.every((n) => n.team !== undefined) &&
        teams.length === 1 &&
        visitTeam !== undefined &&
        visitTeam === northwindTeamRef &&
        categories.includes(`${SYSTEMS.careTeam}|visits`);
      row(
        teamStep,
        good ? 'ok' : 'FAILED',
        `expected each of her schedule-visit Tasks to name ${northwindTeamRef ?? 'the CareTeam tagged visit-team-northwind (none found)'}; got ${gatewayDescribe(found)}: ${named.map((n) => `Task/${n.task.id} ${n.task.status} -> ${n.team ?? 'no care-team input'}`).join(', ') || 'no schedule-visit Task'}${stored ? `; ${visitTeam} is "${stored.name}", category ${categories.join(', ') || 'none'}` : ''}`,
      );
    } catch (err) {
      row(teamStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  const noTeam = maya ? 'her schedule-visit task names no care-team (the row above)' : 'the journey did not make it';
  await control(
    'the journey patient reads the visit team her task names, directly on Medplum (her token)',
    maya,
    visitTeam,
    () => direct(maya as Person, 'GET', visitTeam as string),
    { missing: noTeam },
  );
  await control(
    'the journey patient reads the visit team her task names through the gateway (GET /v1/fhir/CareTeam/{id})',
    maya,
    visitTeam,
    () => viaGateway(maya as Person, visitTeam as string),
    { missing: noTeam },
  );
  const availabilityStep =
    'control: the journey patient asks for the free slots of the visit team her task names (GET /v1/availability?careTeam=…, the next 7 days, through the gateway)';
  if (!maya || !visitTeam) {
    row(availabilityStep, 'not reached', noTeam);
  } else {
    try {
      const now = Date.now();
      const served = await gateway(
        maya,
        `/v1/availability?${new URLSearchParams({
          careTeam: visitTeam,
          start: new Date(now).toISOString(),
          end: new Date(now + 7 * DAY).toISOString(),
        })}`,
      );
      const slots = (served.body as { slots?: unknown[] } | undefined)?.slots;
      row(
        availabilityStep,
        served.status === 200 ? 'ok' : 'FAILED',
        `expected 200, got ${gatewayDescribe(served)}${slots ? `, ${slots.length} slot(s)` : ''}`,
      );
    } catch (err) {
      row(availabilityStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
  const noQueue = 'no CareTeam tagged queue-northwind-intake-review';
  await attack(
    "the journey patient reads the Northwind intake-review queue's CareTeam (a clinicians' work queue) directly",
    { attacker: 'maya', target: queueRef, missing: noQueue },
    (a, t) => direct(a, 'GET', t),
  );
  await attack(
    "the journey patient reads the Northwind intake-review queue's CareTeam through the gateway",
    { attacker: 'maya', target: queueRef, missing: noQueue },
    (a, t) => viaGateway(a, t),
  );
  await attack(
    'carol (Southridge patient) reads the Northwind visit team directly',
    { attacker: 'carol', target: northwindTeamRef, missing: 'no CareTeam tagged visit-team-northwind' },
    (a, t) => direct(a, 'GET', t),
  );
  await attack(
    'carol (Southridge patient) reads the Northwind visit team through the gateway',
    { attacker: 'carol', target: northwindTeamRef, missing: 'no CareTeam tagged visit-team-northwind' },
    (a, t) => viaGateway(a, t),
  );
  // Her search: whatever it lists, no work queue (the provisioned one, and the other the admin made in queues.ts).
  const searchStep =
    'attack: the journey patient searches CareTeam directly on Medplum (CareTeam?_count=100): no work queue (category SYSTEMS.careQueue) in the Bundle';
  if (!maya) {
    row(searchStep, 'not reached', 'the journey did not make it');
  } else {
    try {
      const searched = await direct(maya, 'GET', 'CareTeam?_count=100');
      const listed = entriesOf(searched.body) as CareTeam[];
      const isQueue = (t: CareTeam) =>
        (t.category ?? []).some((c) => c.coding?.some((k) => k.system === SYSTEMS.careQueue));
      const queues = listed.filter(isQueue);
      const held = REFUSED.includes(searched.status) || (searched.status === 200 && queues.length === 0);
      row(
        searchStep,
        held ? 'held' : 'FAILED',
        `expected 403/404, or a Bundle without a queue; got ${describe(searched)}${
          listed.length
            ? `: ${listed
                .map(
                  (t) =>
                    `CareTeam/${t.id} (${
                      (t.category ?? [])
                        .flatMap((c) => c.coding ?? [])
                        .map((k) => k.code)
                        .join(', ') || 'no category'
                    }${isQueue(t) ? ', A QUEUE' : ''})`,
                )
                .join(', ')}`
            : ''
        }`,
      );
    } catch (err) {
      row(searchStep, 'FAILED', `the call threw: ${message(err)}`);
    }
  }
}
