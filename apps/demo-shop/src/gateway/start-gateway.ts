/**
 * Starts the payment gateway as a process of its own (gateway-main.ts), under a Supervisor of
 * its own, so the shop instances' chaos (SIGSTOP of a lock holder) never freezes it. Used by the
 * flash sale, the live shop and the chaos suite.
 */
import { fileURLToPath } from 'node:url'
import { parseLatency } from '../payment-gateway.js'
import { Supervisor } from '../supervisor.js'

/** The gateway's entry script. */
export const GATEWAY_MAIN = fileURLToPath(new URL('./gateway-main.ts', import.meta.url))

/** Options of {@link startGateway}. */
export interface StartGatewayOptions {
  /** PostgreSQL of its ledger, with `?schema=` (the run's schema). */
  readonly databaseUrl: string
  /** `<ms>` or `<min>-<max>`: the latency of every answer. */
  readonly latencyMs: string
  /** Its connection pool; 1 on PGlite (one session). */
  readonly dbPoolSize: number
  readonly stderr?: 'inherit' | 'ignore'
}

/** A running gateway. */
export interface RunningGateway {
  readonly url: string
  readonly pid: number
  stop(): Promise<void>
}

/**
 * Forks the gateway and waits until it listens on a free loopback port.
 * @example
 * ```ts
 * const gateway = await startGateway({ databaseUrl, latencyMs: '30-80', dbPoolSize: 8 })
 * // ... SHOP_GATEWAY_URL: gateway.url ...
 * await gateway.stop()
 * ```
 */
export async function startGateway(options: StartGatewayOptions): Promise<RunningGateway> {
  const supervisor = await Supervisor.start({
    instances: 1,
    entry: GATEWAY_MAIN,
    idPrefix: 'gateway',
    stderr: options.stderr ?? 'ignore',
    env: {
      DATABASE_URL: options.databaseUrl,
      GATEWAY_LATENCY_MS: options.latencyMs,
      GATEWAY_DB_POOL_SIZE: String(options.dbPoolSize),
      PORT: '0',
    },
  })
  const [instance] = supervisor.instances
  if (instance === undefined) {
    await supervisor.stop()
    throw new Error('the gateway did not start')
  }
  // Its shutdown waits for the charges it is running (each at most its latency and its
  // transaction's 30 s limit): give it that before the supervisor's SIGTERM and SIGKILL.
  const graceMs = parseLatency(options.latencyMs).maxMs + 40_000
  return { url: instance.url, pid: instance.pid, stop: () => supervisor.stop(graceMs) }
}
