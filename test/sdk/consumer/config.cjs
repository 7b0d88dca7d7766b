// CommonJS, as a `.js` or `.ts` file is outside a "type": "module" package (tsx compiles such a `.ts`
// to CommonJS): no top-level await there, but the package loads with require (Node 20.19+, 22.12+).
const { createPatientCareClient } = require('@patient-care/sdk');

createPatientCareClient({ baseUrl: process.env.PATIENT_CARE_URL })
  .config.get()
  .then((config) => console.log(JSON.stringify({ projectId: config.projectId })));
