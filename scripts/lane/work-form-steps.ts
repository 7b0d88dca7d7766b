// The rows of clinician work as forms, by name: what each form case checks, as the table says it.
import { WORK_FORMS } from '../../contracts/work-forms';

export const steps = {
  control:
    "control: the Northwind clinician claims the new patient's intake review, answers its stored form with her own QuestionnaireResponse as the admin app writes it (completed, subject the patient, condition I10, author herself) and completes the review with it as output 'questionnaire-response'",
  believed:
    "control: eligibility believes her answers: the Condition keyed by the review (SYSTEMS.eligibilityKey|Task/<review>) appears, I10, asserter and recorder her, her response its evidence; and a ready select-treatment Task waiting unowned in the Northwind intake queue, reasonReference that Condition (versioned), its form stored (Questionnaire/<id> of url select-treatment, written by a Bot, meta.accounts the patient's tenant) with its options",
  southridge:
    "attack: the Southridge clinician writes a QuestionnaireResponse to the review's form about a Northwind patient (subject the patient, author herself)",
  colleague:
    "attack: a Northwind colleague (the clinician outside the queue, clinician policy) writes the answers to the review's form (I10, no author: her policy lets her name only herself); the Northwind clinician claims the review and completes it with the colleague's QuestionnaireResponse as 'questionnaire-response'",
  inHerName:
    "attack: a Northwind colleague (the clinician outside the queue) writes the answers to the review's form in the Northwind clinician's name (I10, `author` the Northwind clinician)",
  patient:
    "attack: the new patient writes a QuestionnaireResponse to the review's form herself, directly on Medplum (her token, subject and author herself, I10); the Northwind clinician claims the review and completes it with it as 'questionnaire-response'",
  // OWN_ANSWERS_ONLY (own-answers.ts).
  pinned:
    "the journey's review and selection, completed through the clinician helper (src/clinician `answer`, which writes as Medplum's Provider app since 65cd263, no longer a pinned version): output 'QuestionnaireResponse' -> QuestionnaireResponse/<id> (unversioned), that response completed, written by her (meta.author), to the form's url without a version, source her, no subject, no author",
  intake:
    "attack: the Northwind clinician rewrites the journey patient's submitted intake QuestionnaireResponse (her yes/no answers flipped)",
  colleagueDraft:
    "precondition: a Northwind colleague (the clinician outside the queue) writes a draft of answers to a review's form (in-progress, no author) about the form case's patient",
  signColleagues:
    "attack: the Northwind clinician takes over the colleague's draft (author herself, still in-progress)",
  submitColleagues:
    "attack: the Northwind clinician submits the colleague's draft (status completed, nothing else changed)",
  patientsName:
    "attack: the Northwind clinician writes answers to a review's form in the patient's name (author the patient, I10)",
  ownDraft:
    'control: the Northwind clinician writes her own draft (in-progress, author herself) and changes it (condition R03.0 instead of I10)',
  ownSubmit: 'control: the Northwind clinician submits her own draft (status completed)',
  ownSubmitted: 'attack: the Northwind clinician changes her own submitted answers (condition back to I10)',
  ownHandedIn:
    "attack: the Northwind clinician changes the answers she handed in for her review, the Condition's evidence (condition R03.0 instead of I10)",
  // Answers as Medplum's app writes them (95e27f7; found driving the app on a real Medplum).
  appShaped:
    "control: answers as Medplum's app writes them: the Northwind clinician claims a new patient's review, answers its form with the condition as a coding without a system ({code: 'I10', display: 'I10'}: the app's coding field can only '+ Create I10') and completes the review naming the output by a coding (type.coding [{code: 'questionnaire-response'}]: the app's CodeableConcept field cannot write text)",
  appShapedBelieved:
    "control: eligibility believes them as the form's own choice: the Condition keyed by the review is I10 with the catalog's system and display ('Essential (primary) hypertension'), asserter her; a ready select-treatment Task",
  appShapedSelection:
    "control: the selection answered the same way (the amlodipine option's canonical as a coding without a system, the output named by a coding): compose-offer composes the offer (the selection's businessStatus offer-composed, the patient's treatment-offer Task)",
  colleagueWhy:
    "the refused hand-in (a colleague's answers, the attack above) says why on the review: businessStatus 'no-answers' and statusReason.text, written once by the eligibility bot",
  // The stored form (65cd263): read in its tenant only, written by the bots only (form-rights.ts).
  formRead:
    "control: the Northwind clinician reads the stored review form (Questionnaire/<id>, the Northwind patient's tenant) directly on Medplum",
  formReadSouthridge: 'attack: the Southridge clinician reads the stored Northwind review form (Questionnaire/<id>)',
  formSearchSouthridge: `attack: the Southridge clinician searches the work forms (Questionnaire?url=${WORK_FORMS.assignCondition}): nothing of the Northwind review form`,
  formReadPatient: 'attack: the patient reads the stored form of her own review (Questionnaire/<id>)',
  formPostClinician: `attack: the Northwind clinician creates a Questionnaire (a work form: url ${WORK_FORMS.assignCondition}, the review form's items)`,
  formPutClinician: 'attack: the Northwind clinician rewrites the stored review form (PUT, one more condition choice)',
  formPostPatient: `attack: the patient creates a Questionnaire (a work form: url ${WORK_FORMS.assignCondition}, the review form's items)`,
  formPutPatient: 'attack: the patient rewrites the stored form of her own review (PUT, one more condition choice)',
  // Medplum's Provider app's way (65cd263): provider-app.ts.
  providerClaim:
    "control: the Provider app's claim in two updates: the Northwind clinician sets herself as the owner of a new patient's review, waiting unowned in the Northwind intake queue (PUT, no If-Match, status still ready), then its status in-progress (PUT, no If-Match)",
  providerAnswers:
    "control: answers as Medplum's Provider app writes them: her QuestionnaireResponse in-progress (questionnaire the stored form's url without version, source her, no subject, no author: 201, written by her, meta.accounts her tenant by the clinician policy's compartment), the review's output replaced by 'QuestionnaireResponse' -> it (200), the review completed while the response is still in-progress (200): eligibility runs on the completed review and writes nothing yet; then the response completed (200)",
  providerBelieved: `control: the completed answers wake eligibility (Subscription QuestionnaireResponse?status=completed&questionnaire=${WORK_FORMS.assignCondition}: a run of the eligibility bot naming the response): the Condition keyed by the review (I10, asserter her, her response its evidence) and a ready select-treatment Task`,
  providerSelection: `control: the selection the Provider app's way (the two-step claim, the amlodipine option as its stored form offers it, the response in-progress, the output, the completion, then the response completed): compose-offer runs on the completed selection and writes nothing yet; woken by the completed answers (Subscription QuestionnaireResponse?status=completed&questionnaire=${WORK_FORMS.selectTreatment}: a run naming the response), it composes the offer (businessStatus offer-composed, a ready treatment-offer Task instantiating the option)`,
};
