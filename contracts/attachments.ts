/**
 * What an uploaded document may be, and how its bytes are recognised: one library for the gateway's
 * upload (`POST /v1/documents`) and for the questionnaire-completion bot, which re-checks every
 * `valueAttachment` an answer uses (JOURNEY section I), since a patient can write a Binary and an
 * answer directly on Medplum. Pure functions on bytes: no I/O, no Node-only module.
 */

/** The largest document accepted, in bytes (10 MiB), counted as the body streams in. */
export const DOCUMENT_MAX_BYTES = 10 * 1024 * 1024;

/**
 * The most files one set of answers may attach: each is read and hashed by the completion bot, whose
 * FHIR quota every patient shares, so their number is bounded before any is read.
 */
export const MAX_ATTACHMENTS_PER_ANSWER = 10;

/** Media types a document may have. Each has a signature its bytes must carry. */
export const DOCUMENT_TYPES = ['application/pdf', 'image/png', 'image/jpeg', 'image/heic'] as const;
export type DocumentType = (typeof DOCUMENT_TYPES)[number];

export const isDocumentType = (value: string | undefined): value is DocumentType =>
  (DOCUMENT_TYPES as readonly string[]).includes(value ?? '');

const startsWith = (bytes: Uint8Array, signature: readonly number[], offset = 0): boolean =>
  bytes.length >= offset + signature.length && signature.every((b, i) => bytes[offset + i] === b);

const ascii = (text: string): number[] => [...text].map((ch) => ch.charCodeAt(0));

/** HEIF brands of HEVC-coded images (ISO/IEC 23008-12): `ftyp` major brand, or `mif1` with a heic brand. */
const HEIC_BRANDS = ['heic', 'heix', 'heim', 'heis', 'hevc', 'hevx'];

function isoBrands(bytes: Uint8Array): string[] {
  if (!startsWith(bytes, ascii('ftyp'), 4)) {
    return [];
  }
  const boxSize = ((bytes[0] << 24) | (bytes[1] << 16) | (bytes[2] << 8) | bytes[3]) >>> 0;
  const end = Math.min(bytes.length, Math.max(boxSize, 16), 256);
  const text = (from: number) => String.fromCharCode(...bytes.subarray(from, from + 4));
  // Major brand at 8, minor version at 12, compatible brands from 16 to the end of the box.
  const brands = [text(8)];
  for (let at = 16; at + 4 <= end; at += 4) {
    brands.push(text(at));
  }
  return brands;
}

/**
 * The document type the bytes' signature ("magic number") shows, or undefined when it is none of the
 * accepted ones: `%PDF-`, PNG's 8-byte signature, JPEG's SOI marker `FF D8 FF`, and an ISO-BMFF `ftyp`
 * box with a HEIC brand.
 */
export function detectDocumentType(bytes: Uint8Array): DocumentType | undefined {
  if (startsWith(bytes, ascii('%PDF-'))) {
    return 'application/pdf';
  }
  if (startsWith(bytes, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) {
    return 'image/png';
  }
  if (startsWith(bytes, [0xff, 0xd8, 0xff])) {
    return 'image/jpeg';
  }
  const brands = isoBrands(bytes);
  if (HEIC_BRANDS.includes(brands[0] ?? '') || (brands[0] === 'mif1' && brands.some((b) => HEIC_BRANDS.includes(b)))) {
    return 'image/heic';
  }
  return undefined;
}

/** The media type a Content-Type header names, without parameters, in lower case. */
export const mediaTypeOf = (header: string | undefined): string | undefined =>
  header?.split(';')[0]?.trim().toLowerCase() || undefined;

/** An attachment as an answer carries it (FHIR Attachment, the fields checked). */
export interface AttachmentClaim {
  contentType?: string;
  url?: string;
  size?: number;
  hash?: string;
}

/** What the store holds behind `url`: the Binary's type and security context, its bytes and their SHA-1. */
export interface StoredDocument {
  contentType?: string;
  /** `Binary.securityContext.reference`. */
  securityContext?: string;
  bytes: Uint8Array;
  /** Base64 SHA-1 of `bytes` (the caller hashes: Web Crypto in the gateway, node:crypto in a bot). */
  sha1: string;
}

/**
 * Why an attachment may not stand in a patient's answer (empty when it may): the Binary must be the
 * patient's own (security context), an accepted type whose bytes carry its signature, within the size
 * limit, and match what the attachment claims (type, size, hash). The completion bot answers
 * `422 invalid_attachment` with these.
 */
export function attachmentProblems(claim: AttachmentClaim, stored: StoredDocument, patient: string): string[] {
  if (stored.securityContext !== patient) {
    // Nothing more is said of a file that is not hers: its type, size or hash would be facts about
    // someone else's document.
    return ['not_own_document'];
  }
  const problems: string[] = [];
  const detected = detectDocumentType(stored.bytes);
  if (!isDocumentType(stored.contentType) || detected !== stored.contentType) {
    problems.push('unsupported_media_type');
  }
  if (stored.bytes.byteLength === 0 || stored.bytes.byteLength > DOCUMENT_MAX_BYTES) {
    problems.push('size_out_of_bounds');
  }
  if (claim.contentType !== stored.contentType) {
    problems.push('content_type_mismatch');
  }
  if (claim.size !== undefined && claim.size !== stored.bytes.byteLength) {
    problems.push('size_mismatch');
  }
  if (claim.hash !== undefined && claim.hash !== stored.sha1) {
    problems.push('hash_mismatch');
  }
  return problems;
}

/** Where a Medplum serves a Binary: its FHIR base and its storage base (both ending in `/`). */
export interface BinaryOrigins {
  /** Medplum's base URL, e.g. `https://api.medplum.com/`. */
  baseUrl: string;
  /** Medplum's `storageBaseUrl`; by default `<baseUrl>storage/`. */
  storageBaseUrl?: string;
}

/** A FHIR id that cannot walk a path (`..`): it starts with a letter or digit. */
const BINARY_ID = /^[A-Za-z0-9][A-Za-z0-9\-.]{0,63}$/;

/** Medplum's default `storageBaseUrl` (packages/server/src/config/loader.ts): `<baseUrl>storage/`. */
export const defaultStorageBaseUrl = (baseUrl: string): string => `${baseUrl.replace(/\/?$/, '/')}storage/`;

/**
 * The Binary an attachment URL names, in each form Medplum writes or serves one (packages/server/src/fhir/
 * rewrite.ts, normalizeBinaryUrl): `Binary/<id>`, `<baseUrl>fhir/R4/Binary/<id>`, and the presigned
 * `<storageBaseUrl><id>/<versionId>?Expires=…&Signature=…` every read hands to whoever may read the
 * Binary. Anything else (another host, a path that merely looks alike) names no Binary of this Medplum.
 * The signature is not checked here: the caller reads the Binary by id with its own access.
 */
export function binaryIdOf(url: string | undefined, origins: BinaryOrigins): string | undefined {
  if (!url) {
    return undefined;
  }
  const base = origins.baseUrl.replace(/\/?$/, '/');
  const storage = origins.storageBaseUrl ?? defaultStorageBaseUrl(base);
  let rest: string | undefined;
  if (url.startsWith('Binary/')) {
    rest = url.slice('Binary/'.length);
  } else if (url.startsWith(`${base}fhir/R4/Binary/`)) {
    rest = url.slice(`${base}fhir/R4/Binary/`.length);
  } else if (url.startsWith(storage)) {
    rest = url.slice(storage.length).split('?')[0];
  }
  const id = rest?.split('/')[0];
  return id !== undefined && BINARY_ID.test(id) ? id : undefined;
}
