import { DEFAULT_LIMITS, type Limits } from '../../src/app-env';

/**
 * A bench gateway's limits: sized for one patient's token driving the whole load (the bench measures
 * speed), except where the bench measures admission itself (BENCH_ADMISSION=default): the entry's own
 * limits, with the fairness bench's variants as the environment sets them (`IN_FLIGHT_TOTAL`,
 * `IN_FLIGHT_WAITING`: 0 none waiting; `MEDPLUM_IN_FLIGHT`: 0 no bound of its own, else `medplumDefault`).
 */
export function benchLimits(medplumDefault: number): Limits {
  const env = process.env;
  if (env.BENCH_ADMISSION !== 'default') {
    return { ...DEFAULT_LIMITS, inFlightPerCaller: 4096, inFlightTotal: 4096 };
  }
  return {
    ...DEFAULT_LIMITS,
    ...(env.IN_FLIGHT_TOTAL ? { inFlightTotal: Number(env.IN_FLIGHT_TOTAL) } : {}),
    ...(env.IN_FLIGHT_WAITING ? { inFlightWaiting: Number(env.IN_FLIGHT_WAITING) } : {}),
    medplumInFlight: Number(env.MEDPLUM_IN_FLIGHT ?? medplumDefault) || undefined,
  };
}
