import type { Binary } from '@medplum/fhirtypes';
import type { AttachmentUrls } from './attachments';
import type { SqliteRepository } from './store/repo';

/**
 * `GET /storage/:id/:versionId?Expires=…&Signature=…`: the bytes a presigned attachment URL names, for
 * whoever holds the URL (packages/server/src/storage/routes.ts: the signature is the permission). Stricter
 * than Medplum's route in what a browser may do with them: never sniffed into another type, and any
 * active content runs sandboxed with nothing allowed (an uploaded SVG or HTML cannot script this origin).
 */
export async function serveStorage(
  request: Request,
  attachments: AttachmentUrls,
  systemRepo: SqliteRepository,
): Promise<Response> {
  const checked = attachments.verify(new URL(request.url));
  if (checked.status !== 200) {
    return new Response(null, { status: checked.status });
  }
  const binary = await systemRepo.readVersion<Binary>('Binary', checked.id, checked.versionId).catch(() => undefined);
  if (!binary) {
    return new Response(null, { status: 404 });
  }
  return new Response(Buffer.from(binary.data ?? '', 'base64'), {
    status: 200,
    headers: {
      'content-type': binary.contentType ?? 'application/octet-stream',
      'x-content-type-options': 'nosniff',
      'content-security-policy': "sandbox; default-src 'none'",
      'cache-control': 'private, no-store',
    },
  });
}
