// The reference patient web app (issue 51 item 7): a patient's whole journey on the SDK, in plain DOM code.
// Every call is the SDK's; every screen is built with textContent (nothing she or the API wrote is ever
// parsed as HTML). See web/README.md.
import {
  createPatientCareClient,
  EVENT_TYPES,
  PatientCareApiError,
  refreshSignIn,
  register,
  signIn,
} from '@patient-care/sdk';

/** A few US states for the sign-up form (where she lives decides her catalog, agreements and visits). */
const STATES = ['CA', 'NY', 'TX', 'WA', 'OR', 'FL', 'IL', 'MA', 'NV', 'AZ'];
/** Her session in this tab only (sessionStorage): gone with the tab; the page runs no inline or foreign script. */
const SESSION_KEY = 'patient-care-session';

const config = await (await fetch('config.json')).json();
const apiBase = (config.api || location.origin).replace(/\/+$/, '');
const clientId = new URLSearchParams(location.search).get('clientId') || config.clientId;
const anonymous = createPatientCareClient({ baseUrl: apiBase });
const { medplumBaseUrl, projectId } = await anonymous.config.get();
const at = { medplumBaseUrl, projectId, clientId };

let session = JSON.parse(sessionStorage.getItem(SESSION_KEY) ?? 'null');
const keep = (tokens) => {
  session = tokens;
  if (tokens) {
    sessionStorage.setItem(SESSION_KEY, JSON.stringify(tokens));
  } else {
    sessionStorage.removeItem(SESSION_KEY);
  }
};

/** The SDK asks for her token before each call: refreshed a minute before it expires. */
const api = createPatientCareClient({
  baseUrl: apiBase,
  accessToken: async () => {
    if (session?.refreshToken && Date.parse(session.expiresAt) - Date.now() < 60_000) {
      keep(await refreshSignIn(at, session.refreshToken));
    }
    return session?.accessToken ?? '';
  },
});

// ---- the page ---------------------------------------------------------------------------------------------

const screen = document.getElementById('screen');
const problem = document.getElementById('problem');
document.getElementById('tenant').textContent = config.tenant ? `${config.tenant}: your care` : 'Your care';

/** An element with attributes (`on*` as listeners) and children (strings become text, never HTML). */
function h(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name.startsWith('on')) {
      node.addEventListener(name.slice(2), value);
    } else if (value !== undefined && value !== false) {
      node.setAttribute(name, value === true ? '' : String(value));
    }
  }
  node.append(...children.flat().filter((c) => c !== undefined && c !== null && c !== false));
  return node;
}

const show = (...nodes) => screen.replaceChildren(...nodes);
const when = (instant) => (instant ? new Date(instant).toLocaleString() : '');
const idOf = (reference) => String(reference).split('/').pop();

/** A list of rows, one per item, or what to say when there are none. */
const listOr = (items, none, row) =>
  items.length === 0 ? h('p', { class: 'muted' }, none) : h('ul', { class: 'list' }, ...items.map(row));

function tell(err) {
  problem.textContent =
    err instanceof PatientCareApiError ? `${err.message} (${err.code})` : String(err?.message ?? err);
  problem.hidden = false;
  setTimeout(() => {
    problem.hidden = true;
  }, 8000);
}

/** A submit handler that disables its form while it works and tells what went wrong. */
const submitting = (work) => async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const buttons = [...form.querySelectorAll('button')];
  for (const b of buttons) b.disabled = true;
  try {
    await work(new FormData(form), form);
  } catch (err) {
    tell(err);
  } finally {
    for (const b of buttons) b.disabled = false;
  }
};

// ---- signing up and in ------------------------------------------------------------------------------------

function welcome() {
  show(
    h(
      'form',
      {
        class: 'card',
        id: 'sign-up',
        onsubmit: submitting(async (data) => {
          keep(
            await register(at, {
              firstName: data.get('firstName'),
              lastName: data.get('lastName'),
              email: data.get('email'),
              password: data.get('password'),
            }),
          );
          // Once, after registering: she joins the tenant of the app she registered through.
          await api.patient.home();
          const me = await api.patient.profile();
          await api.fhir.updatePatient({ ...me, address: [{ state: data.get('state'), country: 'US' }] });
          go('#/');
        }),
      },
      h('h1', {}, 'Create your account'),
      h('label', { for: 'firstName' }, 'First name'),
      h('input', { id: 'firstName', name: 'firstName', required: true, autocomplete: 'given-name' }),
      h('label', { for: 'lastName' }, 'Last name'),
      h('input', { id: 'lastName', name: 'lastName', required: true, autocomplete: 'family-name' }),
      h('label', { for: 'email' }, 'Email'),
      h('input', { id: 'email', name: 'email', type: 'email', required: true, autocomplete: 'email' }),
      h('label', { for: 'password' }, 'Password'),
      h('input', {
        id: 'password',
        name: 'password',
        type: 'password',
        required: true,
        minlength: 8,
        autocomplete: 'new-password',
      }),
      h('label', { for: 'state' }, 'State you live in'),
      h('select', { id: 'state', name: 'state' }, ...STATES.map((s) => h('option', { value: s }, s))),
      h('div', {}, h('button', { class: 'primary', type: 'submit' }, 'Sign up')),
    ),
    h(
      'form',
      {
        class: 'card',
        id: 'sign-in',
        onsubmit: submitting(async (data) => {
          keep(await signIn(at, { email: data.get('email'), password: data.get('password') }));
          go('#/');
        }),
      },
      h('h2', {}, 'Already registered?'),
      h('label', { for: 'in-email' }, 'Email'),
      h('input', { id: 'in-email', name: 'email', type: 'email', required: true, autocomplete: 'email' }),
      h('label', { for: 'in-password' }, 'Password'),
      h('input', {
        id: 'in-password',
        name: 'password',
        type: 'password',
        required: true,
        autocomplete: 'current-password',
      }),
      h('div', {}, h('button', { class: 'secondary', type: 'submit' }, 'Sign in')),
    ),
  );
}

// ---- home -------------------------------------------------------------------------------------------------

const KIND_LABEL = {
  questionnaire: 'Answer',
  measurement: 'Send readings',
  'treatment-offer': 'See your offer',
  'order-decisions': 'Decide your order',
  'schedule-visit': 'Book',
};

async function home() {
  const [me, { tasks }, { protocols }, visits] = await Promise.all([
    api.patient.profile(),
    api.tasks.list(),
    api.protocols.list(),
    api.fhir.search('Appointment', { _sort: '-date', _count: '10' }),
  ]);
  const name = [me.name?.[0]?.given?.[0], me.name?.[0]?.family].filter(Boolean).join(' ');
  const open = tasks.filter((t) => t.status === 'ready');
  show(
    h('h1', {}, `Hello${name ? `, ${name}` : ''}`),
    h(
      'section',
      { id: 'todo' },
      h('h2', {}, 'To do'),
      listOr(open, 'Nothing to do right now. New tasks appear here as your care team works.', (t) =>
        h(
          'li',
          { 'data-kind': t.kind },
          h(
            'span',
            {},
            t.description ?? t.kind,
            t.notBefore ? h('span', { class: 'muted' }, ` (from ${when(t.notBefore)})`) : undefined,
          ),
          h('a', { href: `#/task/${idOf(t.task)}` }, KIND_LABEL[t.kind] ?? 'Open'),
        ),
      ),
    ),
    h(
      'section',
      { id: 'visits' },
      h('h2', {}, 'Your visits'),
      listOr(visits.entry ?? [], 'No visits booked.', ({ resource: a }) =>
        h('li', {}, h('span', {}, a.description ?? 'Visit', ' ', when(a.start)), h('span', {}, a.status)),
      ),
    ),
    h(
      'section',
      { id: 'programs' },
      h('h2', {}, 'Programs for you'),
      h(
        'ul',
        { class: 'list' },
        ...protocols.map((p) =>
          h(
            'li',
            {},
            h('span', {}, p.name, p.description ? h('div', { class: 'muted' }, p.description) : undefined),
            p.assessment
              ? h('button', { class: 'primary', type: 'button', onclick: () => begin(p) }, 'Start')
              : undefined,
          ),
        ),
      ),
    ),
  );
}

/** Starts a program's assessment; the agreements gate first when her care provider asks for consent. */
async function begin(protocol) {
  try {
    await api.assessments.start({ healthcareService: protocol.healthcareService });
    await home();
  } catch (err) {
    if (err instanceof PatientCareApiError && err.code === 'consent_required') {
      go(`#/gate/${idOf(protocol.healthcareService)}`);
      return;
    }
    tell(err);
  }
}

// ---- the agreements gate ----------------------------------------------------------------------------------

async function gate(serviceId) {
  const healthcareService = `HealthcareService/${serviceId}`;
  const { unmet } = await api.agreements.requirements({ healthcareService });
  show(
    h(
      'form',
      {
        class: 'card',
        id: 'gate',
        onsubmit: submitting(async () => {
          await api.agreements.accept(unmet);
          await api.assessments.start({ healthcareService });
          go('#/');
        }),
      },
      h('h1', {}, 'Before you start'),
      h('p', {}, 'Your care provider asks you to read and accept:'),
      ...unmet.map((a, i) =>
        h(
          'fieldset',
          {},
          h('input', { type: 'checkbox', id: `agreement-${i}`, required: true }),
          h('label', { for: `agreement-${i}` }, `${a.category} (version ${a.version}) `),
          h('a', { href: a.sourceUrl, target: '_blank', rel: 'noopener' }, 'read it'),
        ),
      ),
      h('div', {}, h('button', { class: 'primary', type: 'submit' }, 'Accept and start')),
    ),
  );
}

// ---- tasks ------------------------------------------------------------------------------------------------

async function task(id) {
  const { tasks } = await api.tasks.list();
  const t = tasks.find((x) => x.task === `Task/${id}`);
  if (t?.status !== 'ready') {
    show(h('section', {}, h('p', {}, 'This task is done or no longer open.'), h('a', { href: '#/' }, 'Home')));
    return;
  }
  const screens = {
    questionnaire: questionnaireTask,
    measurement: measurementTask,
    'treatment-offer': offerTask,
    'order-decisions': orderTask,
    'schedule-visit': visitTask,
  };
  await screens[t.kind](t);
}

/** One answer control per question of the pinned form (the kinds of item a patient form uses). */
function questionControl(item) {
  const name = item.linkId;
  switch (item.type) {
    case 'boolean':
      return h(
        'fieldset',
        {},
        h('legend', {}, item.text),
        h('input', { type: 'radio', id: `${name}-yes`, name, value: 'true', required: item.required }),
        h('label', { for: `${name}-yes` }, 'Yes'),
        h('input', { type: 'radio', id: `${name}-no`, name, value: 'false' }),
        h('label', { for: `${name}-no` }, 'No'),
      );
    case 'choice':
      return h(
        'div',
        {},
        h('label', { for: name }, item.text),
        h(
          'select',
          { id: name, name, required: item.required },
          h('option', { value: '' }, 'Choose…'),
          ...(item.answerOption ?? []).map((o, i) =>
            h('option', { value: String(i) }, o.valueCoding?.display ?? o.valueString ?? o.valueCoding?.code),
          ),
        ),
      );
    case 'attachment': {
      const preview = h('img', { class: 'preview', alt: '', hidden: true });
      return h(
        'div',
        {},
        h('label', { for: name }, item.text),
        h('input', {
          id: name,
          name,
          type: 'file',
          accept: 'image/*,application/pdf',
          required: item.required,
          onchange: (event) => {
            const [file] = event.currentTarget.files;
            if (file?.type.startsWith('image/')) {
              preview.src = URL.createObjectURL(file);
              preview.hidden = false;
            }
          },
        }),
        preview,
      );
    }
    case 'integer':
    case 'decimal':
      return h(
        'div',
        {},
        h('label', { for: name }, item.text),
        h('input', {
          id: name,
          name,
          type: 'number',
          step: item.type === 'integer' ? 1 : 'any',
          required: item.required,
        }),
      );
    case 'display':
      return h('p', { class: 'muted' }, item.text);
    default:
      return h(
        'div',
        {},
        h('label', { for: name }, item.text),
        h(item.type === 'text' ? 'textarea' : 'input', { id: name, name, required: item.required }),
      );
  }
}

/** Her answer to one question from the form's data (uploading a file first), or undefined when unanswered. */
async function answerTo(item, data) {
  const value = data.get(item.linkId);
  if (value === null || value === '' || (value instanceof File && value.size === 0)) {
    return undefined;
  }
  switch (item.type) {
    case 'boolean':
      return { valueBoolean: value === 'true' };
    case 'choice': {
      const option = item.answerOption?.[Number(value)];
      return option?.valueCoding ? { valueCoding: option.valueCoding } : { valueString: option?.valueString };
    }
    case 'attachment':
      return { valueAttachment: await api.documents.upload(value) };
    case 'integer':
      return { valueInteger: Number(value) };
    case 'decimal':
      return { valueDecimal: Number(value) };
    default:
      return { valueString: String(value) };
  }
}

async function questionnaireTask(t) {
  const [url, version] = t.questionnaire.split('|');
  const form = (await api.fhir.search('Questionnaire', { url, version })).entry?.[0]?.resource;
  const items = form?.item ?? [];
  show(
    h(
      'form',
      {
        class: 'card',
        id: 'questionnaire',
        onsubmit: submitting(async (data) => {
          const answered = [];
          for (const item of items.filter((i) => i.type !== 'display')) {
            const answer = await answerTo(item, data);
            if (answer) {
              answered.push({ linkId: item.linkId, text: item.text, answer: [answer] });
            }
          }
          const response = await api.fhir.createQuestionnaireResponse({
            resourceType: 'QuestionnaireResponse',
            status: 'completed',
            questionnaire: t.questionnaire,
            item: answered,
          });
          await api.tasks.complete(t.task, { questionnaireResponse: `QuestionnaireResponse/${response.id}` });
          go('#/');
        }),
      },
      h('h1', {}, form?.title ?? t.description ?? 'Questions'),
      ...items.map(questionControl),
      h('div', {}, h('button', { class: 'primary', type: 'submit' }, 'Send')),
    ),
  );
}

/** LOINC codes of the readings a plan asks for, as she knows them. */
const READING_NAMES = {
  '8480-6': 'Systolic (upper number)',
  '8462-4': 'Diastolic (lower number)',
  '29463-7': 'Weight',
  '8867-4': 'Heart rate',
};

async function measurementTask(t) {
  const wanted = t.measurements ?? [];
  show(
    h(
      'form',
      {
        class: 'card',
        id: 'measurement',
        onsubmit: submitting(async (data) => {
          await api.tasks.complete(t.task, {
            measurements: wanted.map((m, i) => ({
              code: m.code,
              value: Number(data.get(`value-${i}`)),
              unit: data.get(`unit-${i}`),
            })),
          });
          go('#/');
        }),
      },
      h('h1', {}, t.description ?? 'Your readings'),
      ...wanted.map((m, i) =>
        h(
          'div',
          {},
          h('label', { for: `value-${i}` }, READING_NAMES[m.code.split('|')[1]] ?? m.code),
          h('input', { id: `value-${i}`, name: `value-${i}`, type: 'number', step: 'any', required: true }),
          ' ',
          h('select', { name: `unit-${i}`, 'aria-label': 'unit' }, ...m.units.map((u) => h('option', { value: u }, u))),
        ),
      ),
      h('div', {}, h('button', { class: 'primary', type: 'submit' }, 'Send')),
    ),
  );
}

const medicationName = (request) =>
  request.medicationCodeableConcept?.text ?? request.medicationCodeableConcept?.coding?.[0]?.display ?? 'Medication';

async function offerTask(t) {
  const offer = t.offer ? await api.fhir.read('RequestGroup', idOf(t.offer)) : undefined;
  const decide = (decision) => async () => {
    try {
      await api.tasks.complete(t.task, { decision });
      go('#/');
    } catch (err) {
      tell(err);
    }
  };
  show(
    h(
      'section',
      { id: 'offer' },
      h('h1', {}, 'Your treatment offer'),
      h('p', {}, t.description ?? ''),
      h(
        'ul',
        { class: 'list' },
        ...(offer?.action ?? []).map((a) =>
          h('li', {}, h('span', {}, a.title ?? a.description ?? a.resource?.display ?? 'Part of your plan')),
        ),
      ),
      h('button', { class: 'primary', type: 'button', onclick: decide('accept') }, 'Accept'),
      h('button', { class: 'secondary', type: 'button', onclick: decide('decline') }, 'Decline'),
    ),
  );
}

async function orderTask(t) {
  const items = await Promise.all(
    (t.items ?? []).map(async (item) => ({ ...item, resource: await api.fhir.read(...item.item.split('/')) })),
  );
  show(
    h(
      'form',
      {
        class: 'card',
        id: 'order',
        onsubmit: submitting(async (data) => {
          await api.orders.decide(t.offer, {
            items: items.map((item, i) => {
              const choice = data.get(`item-${i}`);
              return choice === 'decline'
                ? { item: item.item, decision: 'decline' }
                : { item: item.item, decision: 'accept', fulfilment: choice };
            }),
          });
          go('#/');
        }),
      },
      h('h1', {}, 'How should your order reach you?'),
      ...items.map((item, i) =>
        h(
          'div',
          {},
          h('label', { for: `item-${i}` }, medicationName(item.resource)),
          h(
            'select',
            { id: `item-${i}`, name: `item-${i}` },
            ...item.allowed.map((method) => h('option', { value: method }, method)),
            h('option', { value: 'decline' }, 'I do not want it'),
          ),
        ),
      ),
      h('div', {}, h('button', { class: 'primary', type: 'submit' }, 'Place my order')),
    ),
  );
}

async function visitTask(t) {
  const from = Math.max(Date.now(), t.notBefore ? Date.parse(t.notBefore) : 0);
  const free = await api.availability.get({
    careTeam: t.careTeam,
    start: new Date(from).toISOString(),
    end: new Date(from + 7 * 86_400_000).toISOString(),
    count: '12',
  });
  const slots = free.slots ?? [];
  show(
    h(
      'section',
      { id: 'book' },
      h('h1', {}, t.description ?? 'Book your visit'),
      slots.length === 0
        ? h('p', {}, 'No free times in the next week. Try again later.')
        : h(
            'ul',
            { class: 'list' },
            ...slots.map((s) =>
              h(
                'li',
                {},
                h('span', {}, when(s.start)),
                h(
                  'button',
                  {
                    class: 'primary',
                    type: 'button',
                    'data-slot': s.slot,
                    onclick: async () => {
                      try {
                        await api.appointments.book({ task: t.task, slot: s.slot });
                        go('#/');
                      } catch (err) {
                        tell(err);
                      }
                    },
                  },
                  'Book',
                ),
              ),
            ),
          ),
    ),
  );
}

// ---- messages ---------------------------------------------------------------------------------------------

/**
 * Draws a list section again in place when the same one is still on the screen (what she is typing in the
 * form beside it stays); nothing when she has moved on.
 */
function redrawn(section) {
  const current = document.getElementById(section.id);
  if (current && screen.contains(current) && current.dataset.of === section.dataset.of) {
    current.replaceWith(section);
  }
}

async function messages({ inPlace = false } = {}) {
  const { threads } = await api.messages.list();
  const list = h(
    'section',
    { id: 'threads' },
    listOr(threads, 'No messages yet.', (t) =>
      h(
        'li',
        {},
        h('span', {}, t.topic ?? 'Conversation', h('div', { class: 'muted' }, t.lastMessage?.text ?? '')),
        h('a', { href: `#/messages/${idOf(t.thread)}` }, 'Open'),
      ),
    ),
  );
  if (inPlace) {
    redrawn(list);
    return;
  }
  show(
    h('h1', {}, 'Messages with your care team'),
    list,
    h(
      'form',
      {
        class: 'card',
        id: 'new-thread',
        onsubmit: submitting(async (data) => {
          const thread = await api.messages.start({ text: data.get('text'), topic: data.get('topic') || undefined });
          go(`#/messages/${idOf(thread.thread)}`);
        }),
      },
      h('h2', {}, 'Write to your care team'),
      h('label', { for: 'topic' }, 'Subject'),
      h('input', { id: 'topic', name: 'topic', maxlength: 200 }),
      h('label', { for: 'text' }, 'Message'),
      h('textarea', { id: 'text', name: 'text', required: true }),
      h('div', {}, h('button', { class: 'primary', type: 'submit' }, 'Send')),
    ),
  );
}

async function thread(id, { inPlace = false } = {}) {
  const page = await api.messages.read(id);
  const list = h(
    'section',
    { id: 'thread', 'data-of': id },
    ...page.messages.map((m) =>
      h(
        'div',
        { class: m.fromMe ? 'message mine' : 'message' },
        h('div', { class: 'muted' }, `${m.fromMe ? 'You' : (m.from.display ?? 'Your care team')}, ${when(m.sentAt)}`),
        m.text,
      ),
    ),
  );
  if (inPlace) {
    redrawn(list);
    return;
  }
  show(
    h('h1', {}, page.thread.topic ?? 'Conversation'),
    list,
    h(
      'form',
      {
        class: 'card',
        id: 'reply',
        onsubmit: submitting(async (data, form) => {
          await api.messages.send(id, { text: data.get('text') });
          form.reset();
          await thread(id, { inPlace: true });
        }),
      },
      h('label', { for: 'reply-text' }, 'Your answer'),
      h('textarea', { id: 'reply-text', name: 'text', required: true }),
      h('div', {}, h('button', { class: 'primary', type: 'submit' }, 'Send')),
    ),
  );
}

// ---- her events, live -------------------------------------------------------------------------------------

const liveState = document.getElementById('live-state');
const eventList = document.getElementById('events');
let source;
let resumeAfter;

/**
 * Her feed by the browser's own EventSource: it cannot send her token, so it opens a one-minute ticket's URL
 * (`api.events.ticket()`); when the stream ends for good (the ticket spent), a new ticket resumes after
 * the last event heard. Events are named: one listener per type (`onmessage` would get none).
 */
async function listen() {
  source?.close();
  liveState.textContent = 'connecting…';
  const { url } = await api.events.ticket();
  source = new EventSource(`${apiBase}${url}${resumeAfter ? `&after=${encodeURIComponent(resumeAfter)}` : ''}`);
  source.onopen = () => {
    liveState.textContent = 'connected';
  };
  for (const type of EVENT_TYPES) {
    source.addEventListener(type, (event) => {
      resumeAfter = event.lastEventId || resumeAfter;
      heard(type, JSON.parse(event.data));
    });
  }
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED && session) {
      liveState.textContent = 'reconnecting…';
      setTimeout(() => listen().catch(tell), 2000);
    }
  };
}

let refresh;
function heard(type, event) {
  eventList.prepend(
    h('li', { 'data-type': type }, h('strong', {}, type), ' ', h('span', { class: 'muted' }, when(event.occurredAt))),
  );
  // What she is looking at may have changed: the home screen is drawn again, and the messages of an open
  // thread or list in place (never the form she may be typing in).
  clearTimeout(refresh);
  refresh = setTimeout(() => {
    const path = location.hash || '#/';
    if (path === '#/') {
      route().catch(tell);
    } else if (type === 'message.received' && path.startsWith('#/messages')) {
      const id = path.split('/')[2];
      (id ? thread(id, { inPlace: true }) : messages({ inPlace: true })).catch(tell);
    }
  }, 300);
}

// ---- routes -----------------------------------------------------------------------------------------------

function go(path) {
  if (location.hash === path) {
    route().catch(tell);
  } else {
    location.hash = path;
  }
}

async function route() {
  const path = location.hash.slice(1) || '/';
  const signedIn = Boolean(session);
  document.getElementById('nav').hidden = !signedIn;
  document.getElementById('live').hidden = !signedIn;
  if (!signedIn) {
    welcome();
    return;
  }
  if (!source) {
    listen().catch(tell);
  }
  const [, page, id] = path.split('/');
  if (page === 'gate') return gate(id);
  if (page === 'task') return task(id);
  if (page === 'messages') return id ? thread(id) : messages();
  return home();
}

document.getElementById('sign-out').addEventListener('click', () => {
  keep(null);
  source?.close();
  source = undefined;
  eventList.replaceChildren();
  go('#/');
});
window.addEventListener('hashchange', () => route().catch(tell));
route().catch((err) => {
  // A session Medplum no longer honours: sign in again.
  if (err instanceof PatientCareApiError && err.status === 401) {
    keep(null);
    welcome();
    return;
  }
  tell(err);
});
