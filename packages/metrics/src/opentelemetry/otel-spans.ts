import { context, SpanKind, SpanStatusCode, type Attributes, type Tracer } from '@opentelemetry/api'
import type { AcquireOutcomeEvent } from '../lock-event-tally.js'
import { truncateLabel } from '../label-limiter.js'
import type { AcquireOutcome } from '../measurements.js'
import { OTEL_ATTRIBUTES as A } from './names.js'

/** The wall-clock time now in epoch milliseconds, read off the monotonic clock (a jump of the system clock does not bend a span). */
const now = (): number => performance.timeOrigin + performance.now()

const OUTCOME_OF: Readonly<Record<AcquireOutcomeEvent['type'], AcquireOutcome>> = Object.freeze({
  acquired: 'acquired',
  timeout: 'timeout',
  aborted: 'aborted',
  unavailable: 'error',
})

/** The class of error the caller of an acquire got, as the semantic conventions' `error.type`. */
const ERROR_TYPE_OF: Readonly<Record<Exclude<AcquireOutcomeEvent['type'], 'acquired'>, string>> = Object.freeze({
  timeout: 'LockTimeoutError',
  aborted: 'LockAbortedError',
  unavailable: 'LockUnavailableError',
})

/**
 * One span per acquire call that reached a verdict, made when its outcome event arrives and
 * dated back by the wait the event carries: `acquire <group>` from the call to the verdict. The
 * lock emits the event inside the caller's asynchronous context, so the span's parent is the
 * caller's active span (with a context manager registered, as the SDKs' Node set-up does).
 */
export function acquireSpanRecorder(
  tracer: Tracer,
  spanResource: boolean,
): (event: AcquireOutcomeEvent, group: string) => void {
  return (event, group) => {
    const end = now()
    const outcome = OUTCOME_OF[event.type]
    const attributes: Attributes = { [A.group]: group, [A.acquireOutcome]: outcome }
    if (spanResource) attributes[A.resource] = event.resource
    if (event.type === 'acquired') {
      attributes[A.token] = event.token.toString()
      attributes[A.attempts] = event.attempts
    } else {
      attributes[A.errorType] = ERROR_TYPE_OF[event.type]
    }
    const span = tracer.startSpan(
      `acquire ${group}`,
      { kind: SpanKind.INTERNAL, startTime: end - event.waitedMs, attributes },
      context.active(),
    )
    if (event.type === 'timeout') {
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: `gave up after ${Math.round(event.waitedMs)} ms with the lock held`,
      })
    } else if (event.type === 'aborted') {
      span.setStatus({ code: SpanStatusCode.ERROR, message: "the caller's signal aborted the wait" })
    } else if (event.type === 'unavailable') {
      span.recordException(event.error, end)
      span.setStatus({ code: SpanStatusCode.ERROR, message: event.error.message })
    }
    span.end(end)
  }
}

/** What a fenced write reports, in the shape a span needs (the model already bounded). */
export interface FencedWriteSpan {
  readonly model: string
  readonly operation: unknown
  readonly token: unknown
  readonly outcome: 'accepted' | 'refused'
  readonly storedToken: unknown
  readonly durationMs: number | undefined
}

/**
 * One span per fenced write reported: `fenced <operation> <model>`, ending when it is reported and
 * starting `durationMs` before when the reporter measured it (an instant otherwise), a child of the
 * active span (the writer's). A refused write ends with status ERROR and `error.type`
 * `StaleFencingTokenError`, the error its caller gets.
 */
export function fencedWriteSpanRecorder(tracer: Tracer): (write: FencedWriteSpan) => void {
  return (write) => {
    const end = now()
    const operation =
      typeof write.operation === 'string' && write.operation.length > 0 ? truncateLabel(write.operation) : 'write'
    const attributes: Attributes = { [A.model]: write.model, [A.operation]: operation, [A.writeOutcome]: write.outcome }
    if (typeof write.token === 'bigint') attributes[A.writeToken] = write.token.toString()
    if (typeof write.storedToken === 'bigint') attributes[A.storedToken] = write.storedToken.toString()
    const refused = write.outcome === 'refused'
    if (refused) attributes[A.errorType] = 'StaleFencingTokenError'
    const duration = write.durationMs
    const startTime = typeof duration === 'number' && Number.isFinite(duration) && duration > 0 ? end - duration : end
    const span = tracer.startSpan(
      `fenced ${operation} ${write.model}`,
      { kind: SpanKind.INTERNAL, startTime, attributes },
      context.active(),
    )
    if (refused) {
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: 'the write carried a fencing token older than the one stored',
      })
    }
    span.end(end)
  }
}
