import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { launchEmbeddedMedplum } from '../../src/embedded/launch';
import { DEMO_PATIENTS, demoDefinition } from '../../src/provision/demo';
import { SYSTEMS } from '../../src/shared/systems';

/** Bench helper process: the embedded Medplum on its own port; reports where it is and a demo token over IPC. */
const port = Number(process.env.PORT ?? 0);
const probe = serve({ fetch: () => new Response(), port, hostname: '127.0.0.1' });
await new Promise((resolve) => probe.once('listening', resolve));
const actualPort = (probe.address() as AddressInfo).port;
probe.close();
const baseUrl = `http://127.0.0.1:${actualPort}/`;
const medplum = await launchEmbeddedMedplum({ dbPath: ':memory:', baseUrl, definition: demoDefinition() });
serve({ fetch: medplum.app.fetch, port: actualPort, hostname: '127.0.0.1' });
const demo = DEMO_PATIENTS[0];
const patient = await medplum.admin.searchOne('Patient', { identifier: `${SYSTEMS.demoPatient}|${demo.key}` });
const membership = await medplum.admin.searchOne('ProjectMembership', { profile: `Patient/${patient?.id}` });
const client = await medplum.clientFor(membership as NonNullable<typeof membership>);

// The bench asks for this process's CPU time over IPC.
process.on('message', () => process.send?.(process.cpuUsage()));
process.send?.({ baseUrl, projectId: medplum.project.id, patientId: patient?.id, token: client.getAccessToken() });
