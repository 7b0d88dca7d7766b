import { writeFileSync } from 'node:fs';
import { clinicJsonSchema } from '../contracts/clinic';

/** `npm run clinic:schema`: the clinic file's JSON Schema, for editors, from its contract (contracts/clinic.ts). */
writeFileSync('clinics/clinic.schema.json', `${JSON.stringify(clinicJsonSchema(), null, 2)}\n`);
console.log('clinics/clinic.schema.json written');
