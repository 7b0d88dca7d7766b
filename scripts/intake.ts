import type { Attachment, QuestionnaireResponse } from '@medplum/fhirtypes';
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
      const answers = await api.fhir.createQuestionnaireResponse({
        resourceType: 'QuestionnaireResponse',
        status: 'completed',
        questionnaire: task.questionnaire,
        item: [
          { linkId: 'diagnosed', answer: [{ valueBoolean: true }] },
          { linkId: 'medication', answer: [{ valueBoolean: false }] },
          ...(photo ? [{ linkId: 'reading-photo', answer: [{ valueAttachment: photo }] }] : []),
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
