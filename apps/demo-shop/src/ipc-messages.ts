/**
 * The messages between the supervisor and its instance processes (Node's `fork` IPC channel).
 * Tokens travel as decimal strings: IPC serializes to JSON, which has no bigint.
 */
import type { InstanceStats } from './instance.js'

/** Instance → supervisor. */
export type InstanceMessage =
  /** Listening on `port`. */
  | { type: 'ready'; instance: string; pid: number; port: number }
  /** Entered a gateway call while holding `resource` (token null without a lock): a pause target. */
  | { type: 'external-call'; instance: string; pid: number; operation: 'authorize' | 'charge'; resource: string; token: string | null }
  /** The answer to `stats`. */
  | { type: 'stats'; stats: InstanceStats }
  /** Its stats once drained, unasked, right before it exits: the work a woken holder finished late is in them. */
  | { type: 'final-stats'; stats: InstanceStats }
  /** Startup failed; the process exits after sending it. */
  | { type: 'failed'; message: string }

/** Supervisor → instance. */
export type SupervisorMessage = { type: 'stats' } | { type: 'shutdown' }

/** Narrows an IPC payload to a message of ours. */
export function isInstanceMessage(value: unknown): value is InstanceMessage {
  return value !== null && typeof value === 'object' && typeof (value as { type?: unknown }).type === 'string'
}
