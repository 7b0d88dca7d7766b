// Hostile bot input: other people's ids, forged proofs and edge statements, wrong, huge and nested values.
import type { Resource } from '@medplum/fhirtypes';
import { SYSTEMS } from '../../contracts/systems';
import type { Actor, BotInput } from './attack';

export const HUGE = 'A'.repeat(200_000);

export interface HostileContext {
  attacker: Actor;
  victim: Actor;
  /** Client ids of tenant apps that are not the attacker's. */
  otherApps: string[];
  /** Agreement coordinates the attacker may accept (so a forged proof would be written). */
  ownAgreements: string[];
  victimAgreements: string[];
  /** References to the victim's data: CarePlan, Task, Consent, DocumentReference... */
  victimReferences: Record<string, string>;
}

/** An inbound SMS as the platform's SMS integration would write it, here made up by the attacker. */
export function fakeInboundSms(from: string, text = 'STOP', extra: Record<string, unknown> = {}): Resource {
  return {
    resourceType: 'Communication',
    status: 'completed',
    category: [{ coding: [{ system: SYSTEMS.communicationCategory, code: 'inbound-sms' }] }],
    sender: { identifier: { system: SYSTEMS.phone, value: from } },
    payload: [{ contentString: text }],
    ...extra,
  } as Resource;
}

/** A statement in the gateway's format (`<payload>.<signature>`), signed with a key the attacker made up. */
function forgedEdgeStatement(subject: string, loginId: string, ip: string, ua: string): string {
  const now = Math.floor(Date.now() / 1000);
  const payload = Buffer.from(JSON.stringify({ sub: subject, lid: loginId, ip, ua, iat: now, exp: now + 60 })).toString(
    'base64url',
  );
  const signature = Buffer.alloc(32, 7).toString('base64url');
  return `${payload}.${signature}`;
}

export const FORGED_IP = '203.0.113.66';
export const FORGED_AGENT = 'ForgedAgent/6.6 <script>alert(1)</script>';

/** Objects and arrays in turn, `depth` levels deep (linear: one path, not a tree). */
function nested(depth: number): unknown {
  let value: unknown = { leaf: true };
  for (let i = 0; i < depth; i++) {
    value = i % 2 ? [value] : { a: value };
  }
  return value;
}

/**
 * Hostile inputs for any bot: other people's ids, references, phone numbers and apps; forged proof
 * fields and edge statements; wrong types, arrays, null, huge and deeply nested values. Every bot
 * gets every input: a bot that reads a field of any name finds something hostile in it.
 */
export function hostileInputs(ctx: HostileContext): { name: string; input: BotInput }[] {
  const { attacker, victim } = ctx;
  const victimPatient = { reference: victim.profile };
  const forgedSession = { loginId: victim.loginId, ipAddress: FORGED_IP, userAgent: FORGED_AGENT };
  const sms = fakeInboundSms(victim.phone ?? '', 'STOP', {
    id: ctx.victimReferences.Communication?.split('/')[1],
    subject: victimPatient,
    recipient: [victimPatient],
  });
  const kitchenSink: Record<string, unknown> = {
    ...sms,
    agreements: [...ctx.victimAgreements, ...ctx.ownAgreements],
    session: forgedSession,
    edge: forgedEdgeStatement(attacker.profile, attacker.loginId, FORGED_IP, FORGED_AGENT),
    clientId: ctx.otherApps[0],
    client_id: ctx.otherApps[0],
    context: {
      carePlan: ctx.victimReferences.CarePlan,
      task: ctx.victimReferences.Task,
      healthcareService: ctx.victimReferences.HealthcareService,
    },
    carePlan: ctx.victimReferences.CarePlan,
    agreementUrl: ctx.victimAgreements[0]?.split('|')[0],
    agreementVersion: ctx.victimAgreements[0]?.split('|')[1],
    acknowledgeConsequence: true,
    patient: victimPatient,
    patientId: victim.patientId,
    requester: victimPatient,
    profile: victim.profile,
    loginId: victim.loginId,
    login: victim.loginId,
    organization: { reference: victim.organization },
    tenant: victim.tenant,
    consent: ctx.victimReferences.Consent,
  };
  const everyField = (value: unknown) => Object.fromEntries(Object.keys(kitchenSink).map((k) => [k, value]));
  const inputs: { name: string; input: unknown }[] = [
    { name: "everything of the victim's", input: kitchenSink },
    {
      name: "own agreements with a forged session (someone else's login, any IP, any agent)",
      input: { agreements: ctx.ownAgreements, session: forgedSession },
    },
    {
      name: 'own agreements with a 200,000-character session',
      input: { agreements: ctx.ownAgreements, session: { loginId: HUGE, ipAddress: HUGE, userAgent: HUGE } },
    },
    {
      name: 'own agreements with a made-up edge statement',
      input: { agreements: ctx.ownAgreements, edge: 'made-up.edge-statement' },
    },
    {
      name: 'own agreements with an edge statement signed with a guessed key',
      input: { agreements: ctx.ownAgreements, edge: kitchenSink.edge },
    },
    {
      name: "own agreements with an edge statement naming the victim's session",
      input: {
        agreements: ctx.ownAgreements,
        edge: forgedEdgeStatement(victim.profile, victim.loginId, FORGED_IP, FORGED_AGENT),
      },
    },
    { name: "a made-up inbound SMS STOP from the victim's number", input: sms },
    { name: "a made-up inbound SMS naming the victim's patient as sender", input: { ...sms, sender: victimPatient } },
    { name: "another tenant's app client id", input: { clientId: ctx.otherApps[0] } },
    { name: "the victim's care plan and task as context", input: { context: kitchenSink.context } },
    {
      name: "withdraw the victim's agreement",
      input: {
        agreementUrl: kitchenSink.agreementUrl,
        agreementVersion: kitchenSink.agreementVersion,
        acknowledgeConsequence: true,
        patient: victimPatient,
      },
    },
    { name: 'null', input: null },
    { name: 'a number', input: 42 },
    { name: 'a string', input: 'STOP' },
    { name: 'an empty array', input: [] },
    { name: 'an array of hostile objects', input: [kitchenSink, sms] },
    { name: 'an empty object', input: {} },
    { name: 'a 200,000-character string', input: HUGE },
    { name: 'every field 200,000 characters', input: everyField(HUGE) },
    { name: 'every field null', input: everyField(null) },
    { name: 'every field a number', input: everyField(7) },
    { name: 'every field an array', input: everyField([kitchenSink.patient]) },
    { name: 'every field an object', input: everyField({ reference: victim.profile }) },
    { name: 'a deeply nested object', input: { ...kitchenSink, session: nested(2000), context: nested(2000) } },
  ];
  return [
    ...inputs.map(({ name, input }) => ({ name, input: { value: input } as BotInput })),
    {
      name: 'prototype pollution',
      input: { raw: `{"__proto__":{"ok":true,"loginId":"${victim.loginId}"},"constructor":{"prototype":{"x":1}}}` },
    },
    { name: 'malformed JSON', input: { raw: '{"agreements": [' } },
  ];
}
