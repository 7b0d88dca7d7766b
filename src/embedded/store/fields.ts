import type { AccessPolicyResource, Resource } from '@medplum/fhirtypes';

type Json = Record<string, unknown>;

/** Removes each dotted path (`meta.author`, `address.line`) from the resource; arrays are walked. */
export function removeFields<T extends Resource>(resource: T, paths: readonly string[] | undefined): T {
  for (const path of paths ?? []) {
    removePath(resource as unknown as Json, path.split('.'));
  }
  return resource;
}

function removePath(node: unknown, segments: string[]): void {
  if (Array.isArray(node)) {
    for (const item of node) {
      removePath(item, segments);
    }
    return;
  }
  if (node === null || typeof node !== 'object') {
    return;
  }
  const [head, ...rest] = segments;
  const record = node as Json;
  if (rest.length === 0) {
    delete record[head];
  } else {
    removePath(record[head], rest);
  }
}

/**
 * Copies each dotted top-level-or-nested path from `source` into `target` (replacing whatever the
 * caller sent): how readonly and hidden fields survive a write by someone who may not change them.
 */
export function restoreFields<T extends Resource>(
  target: T,
  source: Resource | undefined,
  paths: readonly string[],
): T {
  for (const path of paths) {
    const segments = path.split('.');
    const head = segments[0];
    const targetRecord = target as unknown as Json;
    const sourceValue = source ? (source as unknown as Json)[head] : undefined;
    if (segments.length === 1) {
      if (sourceValue === undefined) {
        delete targetRecord[head];
      } else {
        targetRecord[head] = structuredClone(sourceValue);
      }
      continue;
    }
    // Nested path: restore the whole top-level element, the only safe unit when arrays are involved.
    if (sourceValue === undefined) {
      removePath(targetRecord, segments);
    } else {
      targetRecord[head] = structuredClone(sourceValue);
    }
  }
  return target;
}

export function hiddenFieldsOf(policy: AccessPolicyResource | undefined): string[] {
  return policy?.hiddenFields ?? [];
}

export function protectedFieldsOf(policy: AccessPolicyResource | undefined): string[] {
  return [...(policy?.readonlyFields ?? []), ...(policy?.hiddenFields ?? [])];
}
