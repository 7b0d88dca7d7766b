import { createServer } from 'node:http';
import { Pool } from 'undici';

/**
 * The least a proxy in Node can do, as the anchor for the gateway's own cost (test/bench/real-gateway.ts):
 * node:http in, undici's pool out, every request forwarded as one GET of the same path under Medplum's base
 * URL with the caller's Authorization header, the answer's bytes handed back. No token check, no routing,
 * no log. It reaches Medplum from `from`, an address of its own: Medplum counts requests per address, and
 * the bots' own calls come from Medplum's host. Usage: tsx test/bench/bare-proxy.ts <Medplum base URL> <port> <from>
 */
const [base, port, from] = process.argv.slice(2) as [string, string, string];
const medplum = new URL(base);
const pool = new Pool(medplum.origin, { connections: 64, connect: { localAddress: from } });
createServer(async (req, res) => {
  const answer = await pool.request({
    path: `${medplum.pathname.replace(/\/$/, '')}${req.url}`,
    method: 'GET',
    headers: { authorization: req.headers.authorization ?? '', accept: 'application/fhir+json' },
  });
  const body = Buffer.from(await answer.body.arrayBuffer());
  res.writeHead(answer.statusCode, { 'content-type': 'application/fhir+json', 'content-length': body.length });
  res.end(body);
}).listen(Number(port), '127.0.0.1', () => console.log('listening'));
