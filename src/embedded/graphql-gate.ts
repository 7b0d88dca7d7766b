import { getHeapStatistics } from 'node:v8';
import { tooManyRequests } from '@medplum/core';
import type { OperationOutcome } from '@medplum/fhirtypes';

/**
 * The heap Medplum's GraphQL schema takes once built (fhir-router builds it for every resource type at
 * the first query and keeps it): about 460 MB measured on this machine, rounded up.
 */
const SCHEMA_BYTES = 600 * 1024 * 1024;
/** GraphQL queries at once: each walks the schema and may search several types. */
const IN_FLIGHT = 2;

export interface HeapStatistics {
  heap_size_limit: number;
  used_heap_size: number;
}

/**
 * Admission for `$graphql`: one GraphQL call must never take the server down. The first
 * query builds Medplum's whole GraphQL schema, about 500 MB live: where the heap cannot take it (a
 * host given less memory), the answer is 503 at once, naming the FHIR REST API, instead of an
 * out-of-memory end for every patient. Where it can (`npm start`'s thread is sized for it), at most
 * IN_FLIGHT queries run at once and the rest are 429 with Retry-After, as Medplum answers an over-quota
 * call.
 */
/** A refused GraphQL call: its status and Medplum-style outcome. */
export interface GraphqlRefusal {
  status: 429 | 503;
  outcome: OperationOutcome;
  retryAfterSeconds: number;
}

export class GraphqlGate {
  private inFlight = 0;
  private built = false;

  constructor(private readonly heap: () => HeapStatistics = getHeapStatistics) {}

  /** Runs `work` if admitted, else answers the refusal. */
  async run<T>(work: () => Promise<T>): Promise<T | GraphqlRefusal> {
    if (!this.built) {
      const { heap_size_limit, used_heap_size } = this.heap();
      if (heap_size_limit - used_heap_size < SCHEMA_BYTES) {
        return { status: 503, outcome: unavailable(), retryAfterSeconds: 3600 };
      }
    }
    if (this.inFlight >= IN_FLIGHT) {
      return { status: 429, outcome: busy(), retryAfterSeconds: 1 };
    }
    this.inFlight++;
    try {
      const result = await work();
      this.built = true;
      return result;
    } finally {
      this.inFlight--;
    }
  }
}

export const isRefusal = (value: unknown): value is GraphqlRefusal =>
  typeof value === 'object' && value !== null && 'retryAfterSeconds' in value && 'outcome' in value;

function busy(): OperationOutcome {
  const outcome: OperationOutcome = structuredClone(tooManyRequests);
  outcome.issue[0].diagnostics = JSON.stringify({ _msBeforeNext: 1000, reason: 'graphql-in-flight', limit: IN_FLIGHT });
  return outcome;
}

function unavailable(): OperationOutcome {
  return {
    resourceType: 'OperationOutcome',
    issue: [
      {
        severity: 'error',
        code: 'transient',
        details: {
          text: 'GraphQL needs more memory than this embedded Medplum is given: use the FHIR REST API (fhir/R4/...)',
        },
      },
    ],
  };
}
