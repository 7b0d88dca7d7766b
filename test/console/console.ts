import '@mantine/core/styles.css';
import '@medplum/react/styles.css';
import {
  Alert,
  Button,
  type ButtonProps,
  Group,
  MantineProvider,
  Stack,
  Text,
  type TextProps,
  Title,
} from '@mantine/core';
import { getReferenceString, MedplumClient, Operator, type SearchRequest, type WithId } from '@medplum/core';
import type { CareTeam, Communication, Media, Questionnaire, QuestionnaireResponse, Task } from '@medplum/fhirtypes';
import {
  AttachmentDisplay,
  Document,
  MedplumProvider,
  PatientSummary,
  QuestionnaireForm,
  QuestionnaireResponseDisplay,
  ResourceName,
  SearchControl,
  SignInForm,
  ThreadChat,
  useMedplum,
  useMedplumProfile,
} from '@medplum/react';
import { type ComponentPropsWithoutRef, type FC, createElement as h, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { SYSTEMS } from '../../contracts/systems';
import { type Clinician, clinicianOf } from '../../src/clinician';

/**
 * A clinician's console made of the `@medplum/react` components Medplum's Provider app shows these screens
 * with: SignInForm, her queue as a SearchControl over Task, a task's stored form as a QuestionnaireForm,
 * what the patient sent as QuestionnaireResponseDisplay (answers, with their question text) and
 * AttachmentDisplay (her uploads, from her record's Media: bots/lib/evidence.ts). Every write is the clinician
 * helper's (src/clinician/), the same plain FHIR calls Medplum's app makes. Written without JSX: the
 * project's tsconfig compiles no TSX. Its Medplum and project come from the page's query string.
 */
const params = new URLSearchParams(window.location.search);
const medplum = new MedplumClient({ baseUrl: params.get('medplum') ?? '', cacheTime: 0 });
const projectId = params.get('project') ?? '';

// Mantine's polymorphic components pinned to their default element: createElement cannot infer their generic props.
const Btn: FC<ButtonProps & ComponentPropsWithoutRef<'button'>> = Button;
const Txt: FC<TextProps & ComponentPropsWithoutRef<'p'>> = Text;

/** Her queue: the `ready`, unowned work waiting in the CareTeams she is a member of, oldest first. */
function queueSearch(queues: string[]): SearchRequest {
  return {
    resourceType: 'Task',
    filters: [
      { code: 'performer', operator: Operator.EQUALS, value: queues.map((q) => `${SYSTEMS.queue}|${q}`).join(',') },
      { code: 'owner', operator: Operator.MISSING, value: 'true' },
      { code: 'status', operator: Operator.EQUALS, value: 'ready' },
    ],
    fields: ['description', 'for', 'priority', 'authoredOn'],
    sortRules: [{ code: 'authored-on' }],
    count: 20,
  };
}

function Queue(props: { clinician: Clinician; onOpen: (task: WithId<Task>) => void }) {
  const [search, setSearch] = useState<SearchRequest>();
  useEffect(() => {
    props.clinician.queues().then((teams) => setSearch(queueSearch(teams.map((team) => getReferenceString(team)))));
  }, [props.clinician]);
  if (!search) {
    return h(Txt, null, 'Loading your queues…');
  }
  return h(
    Stack,
    null,
    h(Title, { order: 2 }, 'Queue'),
    h(SearchControl, {
      search,
      onChange: (e) => setSearch(e.definition),
      onClick: (e) => props.onOpen(e.resource as WithId<Task>),
      hideFilters: true,
    }),
  );
}

/** What the patient sent: her completed answers (with their questions), her vital signs and her uploads, as her record holds them. */
function Evidence(props: { patient: string }) {
  const client = useMedplum();
  const [answers, setAnswers] = useState<QuestionnaireResponse[]>([]);
  const [uploads, setUploads] = useState<Media[]>([]);
  useEffect(() => {
    const load = async () => {
      // As Medplum's apps show a response: its own item texts (the platform stores each question's), no Questionnaire read.
      setAnswers(
        await client.searchResources('QuestionnaireResponse', { subject: props.patient, status: 'completed' }),
      );
      setUploads(await client.searchResources('Media', { subject: props.patient }));
    };
    load().catch(console.error);
  }, [client, props.patient]);
  return h(
    Stack,
    null,
    h(Title, { order: 3 }, 'What the patient sent'),
    ...answers.map((response) =>
      h(QuestionnaireResponseDisplay, { key: response.id, questionnaireResponse: response }),
    ),
    ...uploads.map((media) => h(AttachmentDisplay, { key: media.id, value: media.content, maxWidth: 320 })),
    // Her chart's summary as the Provider app shows it (its Vitals read a blood pressure panel).
    h('div', { 'data-testid': 'patient-summary' }, h(PatientSummary, { patient: { reference: props.patient } })),
  );
}

/**
 * Her messages with the patient, as the Provider app's Messages writes them: a new thread opened as its
 * NewTopicDialog opens one (about the patient, to her and the clinician), then @medplum/react's ThreadChat,
 * the app's own chat (its messages `partOf` the thread, the thread's `sent` touched). Its live updates need
 * Medplum's WebSocket subscriptions, which the embedded Medplum refuses: *Reload* shows what arrived since.
 */
function Messages(props: { clinician: Clinician; patient: string }) {
  const client = useMedplum();
  const [thread, setThread] = useState<Communication>();
  const [shown, setShown] = useState(0);
  const [error, setError] = useState<string>();
  const open = () => {
    const me = props.clinician.profile;
    client
      .createResource<Communication>({
        resourceType: 'Communication',
        status: 'in-progress',
        subject: { reference: props.patient },
        sender: me,
        recipient: [{ reference: props.patient }, me],
        topic: { text: 'Your blood pressure' },
      })
      .then(setThread, (err: unknown) => setError(String(err)));
  };
  return h(
    Stack,
    null,
    h(Title, { order: 3 }, 'Messages'),
    error && h(Alert, { color: 'red', title: 'Refused' }, error),
    thread
      ? h(
          'div',
          { 'data-testid': 'thread' },
          h(Btn, { variant: 'subtle', onClick: () => setShown((n) => n + 1) }, 'Reload'),
          // A box of its own height, as the app's Messages page gives the chat (it sizes itself to its parent).
          h(
            'div',
            { style: { height: 480, display: 'flex', flexDirection: 'column' } },
            h(ThreadChat, { key: shown, thread, onError: (err: Error) => setError(err.message) }),
          ),
        )
      : h(Btn, { variant: 'light', onClick: open }, 'Message the patient'),
  );
}

/** Her colleagues of the task's queue (its CareTeam's members), to hand the work over to. */
function HandOver(props: { clinician: Clinician; task: WithId<Task>; onDone: (task: WithId<Task>) => void }) {
  const client = useMedplum();
  const [members, setMembers] = useState<string[]>([]);
  useEffect(() => {
    const queue = props.task.performerType
      ?.flatMap((t) => t.coding ?? [])
      .find((c) => c.system === SYSTEMS.queue)?.code;
    if (queue) {
      client
        .readReference({ reference: queue } as { reference: string })
        .then((team) =>
          setMembers(
            ((team as CareTeam).participant ?? [])
              .map((p) => p.member?.reference ?? '')
              .filter((m) => m.startsWith('Practitioner/') && m !== props.clinician.profile.reference),
          ),
        )
        .catch(console.error);
    }
  }, [client, props.task, props.clinician]);
  return h(
    Group,
    null,
    ...members.map((member) =>
      h(
        Btn,
        {
          key: member,
          variant: 'light',
          onClick: () =>
            props.clinician.handOver(props.task.id, { reference: member }).then(props.onDone, console.error),
        },
        'Hand over to ',
        h(ResourceName, { value: { reference: member } }),
      ),
    ),
  );
}

/** The work she holds (taken, in progress), to open again. */
function MyWork(props: { clinician: Clinician; onOpen: (task: WithId<Task>) => void }) {
  const [mine, setMine] = useState<WithId<Task>[]>([]);
  useEffect(() => {
    props.clinician.claimed().then(setMine, console.error);
  }, [props.clinician]);
  return h(
    Stack,
    null,
    h(Title, { order: 2 }, 'My work'),
    ...mine.map((task) =>
      h(Btn, { key: task.id, variant: 'subtle', onClick: () => props.onOpen(task) }, task.description ?? 'Task'),
    ),
  );
}

function Work(props: { clinician: Clinician; task: WithId<Task>; onDone: (task: WithId<Task>) => void }) {
  const [task, setTask] = useState(props.task);
  const [error, setError] = useState<string>();
  const [form, setForm] = useState<Questionnaire>();
  // The task's stored form (contracts/work-forms.ts), read as the Provider app reads it.
  useEffect(() => {
    props.clinician.form(task).then(setForm, (err: unknown) => setError(String(err)));
  }, [props.clinician, task]);
  const run = (step: () => Promise<WithId<Task>>) =>
    step().then(setTask, (err: unknown) => setError(err instanceof Error ? err.message : String(err)));
  const submit = (response: QuestionnaireResponse) =>
    run(async () => {
      const done = await props.clinician.answer(task.id, response.item ?? []);
      props.onDone(done);
      return done;
    });
  return h(
    Stack,
    null,
    h(Title, { order: 2 }, task.description ?? 'Task'),
    h(
      Txt,
      null,
      'About ',
      task.for ? h(ResourceName, { value: task.for }) : 'nobody',
      h('span', { 'data-testid': 'task-status' }, ` (${task.status})`),
    ),
    error && h(Alert, { color: 'red', title: 'Refused' }, error),
    task.for?.reference && h(Evidence, { patient: task.for.reference }),
    task.for?.reference && h(Messages, { clinician: props.clinician, patient: task.for.reference }),
    task.status === 'ready' && h(Btn, { onClick: () => run(() => props.clinician.claim(task.id)) }, 'Claim'),
    task.status !== 'completed' && h(HandOver, { clinician: props.clinician, task, onDone: setTask }),
    h('p', { 'data-testid': 'task-owner' }, 'Held by ', task.owner ? h(ResourceName, { value: task.owner }) : 'nobody'),
    task.status === 'in-progress' &&
      form &&
      h(QuestionnaireForm, { questionnaire: form, subject: task.for, onSubmit: submit, submitButtonText: 'Complete' }),
  );
}

function Console() {
  const profile = useMedplumProfile();
  const client = useMedplum();
  const [clinician, setClinician] = useState<Clinician>();
  const [open, setOpen] = useState<WithId<Task>>();
  const [done, setDone] = useState<WithId<Task>>();
  useEffect(() => {
    if (profile) {
      clinicianOf(client).then(setClinician);
    }
  }, [profile, client]);
  if (!profile) {
    return h(SignInForm, { projectId }, h(Title, { order: 2 }, 'Clinician sign-in'));
  }
  if (!clinician) {
    return h(Txt, null, 'Signing in…');
  }
  return h(
    Stack,
    null,
    h(
      Group,
      null,
      h(Txt, null, 'Signed in as ', h(ResourceName, { value: clinician.profile })),
      h(Btn, { variant: 'light', onClick: () => setOpen(undefined) }, 'Open the queue'),
    ),
    done && h(Alert, { color: 'green', title: 'Completed' }, `${done.description} (${done.status})`),
    open
      ? h(Work, {
          key: open.id,
          clinician,
          task: open,
          onDone: (task) => {
            setDone(task);
            setOpen(undefined);
          },
        })
      : h(
          Stack,
          null,
          h(MyWork, {
            clinician,
            onOpen: (task) => {
              setDone(undefined);
              setOpen(task);
            },
          }),
          h(Queue, {
            clinician,
            onOpen: (task) => {
              setDone(undefined);
              setOpen(task);
            },
          }),
        ),
  );
}

const page = h(Document, null, h(Console));
createRoot(document.getElementById('root') as HTMLElement).render(
  // biome-ignore lint/correctness/noChildrenProp: its props type requires children, which createElement's rest arguments cannot satisfy
  h(MantineProvider, null, h(MedplumProvider, { medplum, children: page })),
);
