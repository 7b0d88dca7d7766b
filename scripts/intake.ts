import type {
  Attachment,
  Questionnaire,
  QuestionnaireResponse,
  QuestionnaireResponseItemAnswer,
} from '@medplum/fhirtypes';
import type { PatientCareClient } from '../src/sdk';

type StartedAssessment = Awaited<ReturnType<PatientCareClient['assessments']['start']>>;

/**
 * The blood-pressure check's intake as the demo patient answers it (`npm run demo`, the real-Medplum lane):
 * its questionnaire (diagnosed, no medication, the photo of a reading when she uploaded one) and a raised
 * reading for its measurement task. Returns her QuestionnaireResponse's reference.
 */
export async function answerBloodPressureIntake(
  api: PatientCareClient,
  assessment: StartedAssessment,
  photo?: Attachment,
): Promise<string> {
  let questionnaireResponse = '';
  for (const task of assessment.tasks) {
    if (task.kind === 'questionnaire') {
      // Each answer carries its question's text, as a form app built on @medplum/react's QuestionnaireForm
      // writes it: Medplum's apps show a response's items by that text (the question is not looked up).
      const [url, version] = (task.questionnaire ?? '').split('|');
      const form = (await api.fhir.search<Questionnaire>('Questionnaire', { url, version })).entry?.[0]?.resource;
      const text = (linkId: string) => form?.item?.find((i) => i.linkId === linkId)?.text;
      const answered = (linkId: string, answer: QuestionnaireResponseItemAnswer) => ({
        linkId,
        ...(text(linkId) ? { text: text(linkId) } : {}),
        answer: [answer],
      });
      const answers = await api.fhir.createQuestionnaireResponse({
        resourceType: 'QuestionnaireResponse',
        status: 'completed',
        questionnaire: task.questionnaire,
        item: [
          answered('diagnosed', { valueBoolean: true }),
          answered('medication', { valueBoolean: false }),
          ...(photo ? [answered('reading-photo', { valueAttachment: photo })] : []),
        ],
      } as QuestionnaireResponse);
      questionnaireResponse = `QuestionnaireResponse/${answers.id}`;
      await api.tasks.complete(task.task, { questionnaireResponse });
    } else {
      await api.tasks.complete(task.task, {
        measurements: [
          { code: 'http://loinc.org|8480-6', value: 152, unit: 'mm[Hg]' },
          { code: 'http://loinc.org|8462-4', value: 96, unit: 'mm[Hg]' },
        ],
      });
    }
  }
  return questionnaireResponse;
}
