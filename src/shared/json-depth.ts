/**
 * How deep a body may nest objects and arrays. FHIR resources stay far below it (a transaction whose
 * QuestionnaireResponse nests items 40 deep is under 100); past it, every recursive walk downstream (the
 * validator, FHIRPath, cloning, JSON.stringify) risks the stack. Real Medplum has no such limit: its
 * validator overflows and the router answers that 400 (packages/fhir-router/src/fhirrouter.ts, handleRequest).
 */
export const MAX_JSON_DEPTH = 100;

/** Iterative, so a hostile body cannot overflow the stack here either. */
export function nestedDeeperThan(value: unknown, limit: number): boolean {
  const nodes: unknown[] = [value];
  const depths: number[] = [1];
  while (nodes.length > 0) {
    const node = nodes.pop();
    const depth = depths.pop() as number;
    if (node === null || typeof node !== 'object') {
      continue;
    }
    if (depth > limit) {
      return true;
    }
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (child !== null && typeof child === 'object') {
        nodes.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}
