/**
 * Acquire spans on the real tracing SDK (sdk-trace-base, in-memory exporter, Node's
 * AsyncLocalStorage context manager as the Node SDK registers it) from real Lockers on the shared
 * Redis: one span per acquire with its wait, attempts, outcome and token, under the caller's
 * span — also for waiters woken by another process's release, where the wake-up arrives on the
 * subscriber connection and not in the caller's context.
 */
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { context, SpanStatusCode, type Span } from '@opentelemetry/api'
import { LockAbortedError, LockTimeoutError, LockUnavailableError, type LockEvent } from '@fencelock/lock'
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base'
import { afterAll, describe, expect, it } from 'vitest'
import { instrumentOpenTelemetry, OTEL_ATTRIBUTES as A } from '../../src/opentelemetry/index.js'
import { durationMs, otelMetrics, otelTraces } from '../support/otel.js'
import { connectShared, connectThroughProxy, makeLocker, resourceIn, sleep, uniqueGroup } from '../support/redis.js'

const contextManager = new AsyncLocalStorageContextManager().enable()
context.setGlobalContextManager(contextManager)
afterAll(() => {
  context.disable()
})

const redis = await connectShared()

/** A locker instrumented into its own tracer provider, and the outcome events it emitted (to compare the spans with). */
function setUp(options: { spanResource?: boolean; traces?: boolean } = {}) {
  const traces = otelTraces()
  const { meterProvider } = otelMetrics()
  const locker = makeLocker(redis)
  const events: LockEvent[] = []
  locker.listen((e) => {
    if (e.type === 'acquired' || e.type === 'timeout' || e.type === 'aborted' || e.type === 'unavailable')
      events.push(e)
  })
  instrumentOpenTelemetry(locker, { meterProvider, tracerProvider: traces.tracerProvider, ...options })
  const tracer = traces.tracerProvider.getTracer('test')
  /** Runs `fn` inside a new active span of the test's own: the caller's span. */
  const within = <T>(name: string, fn: (span: Span) => Promise<T>): Promise<T> =>
    tracer.startActiveSpan(name, async (span) => {
      try {
        return await fn(span)
      } finally {
        span.end()
      }
    })
  return { traces, locker, events, within, group: uniqueGroup('span') }
}

const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId

describe('acquire spans', () => {
  it("a free acquire: one span `acquire <group>`, a child of the caller's span, with the token as a string, 1 attempt, outcome acquired, as long as the wait", async () => {
    const { traces, locker, events, within, group } = setUp()
    const lock = await within('request', async (parent) => {
      const lock = await locker.acquire(resourceIn(group))
      return Object.assign(lock, { parent: parent.spanContext() })
    })
    await lock.release()
    const [span] = traces.named(`acquire ${group}`)
    expect(traces.named(`acquire ${group}`)).toHaveLength(1)
    expect(parentOf(span!)).toBe(lock.parent.spanId)
    expect(span!.spanContext().traceId).toBe(lock.parent.traceId)
    const event = events[0] as Extract<LockEvent, { type: 'acquired' }>
    expect(span!.attributes).toEqual({
      [A.group]: group,
      [A.acquireOutcome]: 'acquired',
      [A.token]: lock.token.toString(),
      [A.attempts]: 1,
    })
    expect(typeof span!.attributes[A.token]).toBe('string')
    expect(BigInt(span!.attributes[A.token] as string)).toBe(lock.token)
    expect(event.attempts).toBe(1)
    expect(durationMs(span!)).toBeCloseTo(event.waitedMs, 2)
    expect(span!.status.code).toBe(SpanStatusCode.UNSET)
  })

  it("waiters woken by a release elsewhere: each span under its own caller's span, with the attempts and token of its grant, as long as its wait", async () => {
    const { traces, locker, events, within, group } = setUp()
    const resource = resourceIn(group)
    const holder = await makeLocker(redis).acquire(resource)
    const waiters = ['first', 'second'].map((name) =>
      within(name, async (parent) => {
        const lock = await locker.acquire(resource, { waitMs: 10_000 })
        const parentId = parent.spanContext().spanId
        // Held a little, so the other waiter's wait is measurably longer.
        await sleep(30)
        await lock.release()
        return { token: lock.token, parentId }
      }),
    )
    await sleep(60)
    // Released from outside any span: the wake-up reaches the waiters through pub/sub.
    await context.with(context.active(), () => holder.release())
    const granted = await Promise.all(waiters)
    const spans = traces.named(`acquire ${group}`)
    expect(spans).toHaveLength(2)
    for (const { token, parentId } of granted) {
      const span = spans.find((s) => s.attributes[A.token] === token.toString())
      expect(span, `the span of token ${token}`).toBeDefined()
      expect(parentOf(span!)).toBe(parentId)
      const event = events.find((e) => e.type === 'acquired' && e.token === token) as Extract<
        LockEvent,
        { type: 'acquired' }
      >
      expect(span!.attributes[A.attempts]).toBe(event.attempts)
      expect(event.attempts).toBeGreaterThanOrEqual(2)
      expect(durationMs(span!)).toBeCloseTo(event.waitedMs, 2)
      // Both waited at least until the holder let go, 60 ms after they began.
      expect(durationMs(span!)).toBeGreaterThanOrEqual(55)
    }
    expect(new Set(granted.map((g) => g.parentId)).size).toBe(2)
  })

  it('a timeout, an abort, and Redis not answering: status ERROR, error.type the class the caller gets, no token', async () => {
    const { traces, locker, within, group } = setUp()
    const resource = resourceIn(group)
    const holder = await makeLocker(redis).acquire(resource)
    await within('timeout', () =>
      expect(locker.acquire(resource, { waitMs: 100 })).rejects.toBeInstanceOf(LockTimeoutError),
    )
    const controller = new AbortController()
    setTimeout(() => controller.abort(), 30)
    await within('abort', () =>
      expect(locker.acquire(resource, { waitMs: 5_000, signal: controller.signal })).rejects.toBeInstanceOf(
        LockAbortedError,
      ),
    )
    await holder.release()
    const spans = traces.named(`acquire ${group}`)
    const timeout = spans.find((s) => s.attributes[A.acquireOutcome] === 'timeout')!
    expect(timeout.status.code).toBe(SpanStatusCode.ERROR)
    expect(timeout.attributes[A.errorType]).toBe('LockTimeoutError')
    expect(timeout.attributes[A.token]).toBeUndefined()
    expect(durationMs(timeout)).toBeGreaterThanOrEqual(99)
    expect(traces.spans().find((s) => s.spanContext().spanId === parentOf(timeout))?.name).toBe('timeout')
    const aborted = spans.find((s) => s.attributes[A.acquireOutcome] === 'aborted')!
    expect(aborted.status.code).toBe(SpanStatusCode.ERROR)
    expect(aborted.attributes[A.errorType]).toBe('LockAbortedError')
    expect(traces.spans().find((s) => s.spanContext().spanId === parentOf(aborted))?.name).toBe('abort')

    // Redis that does not answer: a locker through a proxy that drops everything.
    const { proxy, client } = await connectThroughProxy({ maxRetriesPerRequest: null })
    await client.ping()
    const flaky = makeLocker(client, { commandTimeoutMs: 80 })
    const flakyTraces = otelTraces()
    instrumentOpenTelemetry(flaky, {
      meterProvider: otelMetrics().meterProvider,
      tracerProvider: flakyTraces.tracerProvider,
    })
    proxy.blackhole()
    await expect(flaky.acquire(resourceIn(group), { waitMs: 0 })).rejects.toBeInstanceOf(LockUnavailableError)
    const [unavailable] = flakyTraces.named(`acquire ${group}`)
    expect(unavailable?.attributes[A.acquireOutcome]).toBe('error')
    expect(unavailable?.attributes[A.errorType]).toBe('LockUnavailableError')
    expect(unavailable?.status.code).toBe(SpanStatusCode.ERROR)
    expect(unavailable?.events.map((e) => e.name)).toEqual(['exception'])
    // Dropped commands never get a reply: the proxy and client are closed in afterAll.
  })

  it('one span per acquire call that reached a verdict: using() and a granted tryAcquire() make one, a tryAcquire() that finds the lock held and a re-entry make none', async () => {
    const { traces, locker, group } = setUp()
    const resource = resourceIn(group)
    await locker.using(resource, async () => {
      // A re-entry: the same grant, no round trip, no `acquired` event.
      const again = await locker.acquire(resource)
      await again.release()
      // Held here: another locker's tryAcquire() finds it so.
      expect(await makeLocker(redis).tryAcquire(resource)).toBeNull()
    })
    const tried = await locker.tryAcquire(resource)
    await tried!.release()
    const spans = traces.named(`acquire ${group}`)
    expect(spans).toHaveLength(2)
    expect(spans.map((s) => s.attributes[A.acquireOutcome])).toEqual(['acquired', 'acquired'])
  })

  it('puts the resource on the span only with spanResource: true, and makes no span with traces: false', async () => {
    const withResource = setUp({ spanResource: true })
    const resource = resourceIn(withResource.group)
    await (await withResource.locker.acquire(resource)).release()
    expect(withResource.traces.named(`acquire ${withResource.group}`)[0]?.attributes[A.resource]).toBe(resource)

    const without = setUp()
    await (await without.locker.acquire(resourceIn(without.group))).release()
    expect(without.traces.named(`acquire ${without.group}`)[0]?.attributes[A.resource]).toBeUndefined()

    const off = setUp({ traces: false })
    await (await off.locker.acquire(resourceIn(off.group))).release()
    expect(off.traces.spans()).toEqual([])
  })
})
