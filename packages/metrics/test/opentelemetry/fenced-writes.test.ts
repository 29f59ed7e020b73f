/**
 * Fenced writes through OpenTelemetry, on the real SDK and the real fencing extension over
 * PostgreSQL (a schema of this file's own): a refusal reported by `fencing({ onRejection })` is a
 * span under the writer's span and a count of `fencelock.fencing.writes{outcome=refused}`; an
 * accepted write, reported as the structural `FencedWriteReport` a fencing hook for every write
 * would hand over, is the same with `outcome=accepted`.
 */
import { randomUUID } from 'node:crypto'
import { fencing, StaleFencingTokenError } from '@fencelock/fencing'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { context, SpanStatusCode, type Span } from '@opentelemetry/api'
import { afterAll, describe, expect, it } from 'vitest'
import {
  instrumentFencingOpenTelemetry,
  OTEL_ATTRIBUTES as A,
  OTEL_INSTRUMENTS as I,
  OTHER_LABEL,
  type FencedWriteReport,
} from '../../src/opentelemetry/index.js'
import { testDatabase } from '../support/database.js'
import { durationMs, otelMetrics, otelTraces } from '../support/otel.js'

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
afterAll(() => {
  context.disable()
})

const { prisma } = await testDatabase('otel_fenced')

/** A product of its own, the fenced client reporting through a fresh SDK, and the writer's spans. */
async function setUp(options: { traces?: boolean } = {}) {
  const { meterProvider, collect } = otelMetrics()
  const traces = otelTraces()
  const telemetry = instrumentFencingOpenTelemetry({
    meterProvider,
    tracerProvider: traces.tracerProvider,
    models: ['Product'],
    ...options,
  })
  const db = prisma.$extends(
    fencing<typeof prisma>({ models: { Product: 'fenceToken' }, onRejection: telemetry.onFencingRejection }),
  )
  const sku = `otel-${randomUUID()}`
  await prisma.product.create({ data: { sku, name: 'Widget', priceCents: 100, stock: 10 } })
  const tracer = traces.tracerProvider.getTracer('test')
  const within = <T>(name: string, fn: (span: Span) => Promise<T>): Promise<T> =>
    tracer.startActiveSpan(name, async (span) => {
      try {
        return await fn(span)
      } finally {
        span.end()
      }
    })
  return { telemetry, db, sku, traces, collect, within }
}

const writes = async (
  collect: () => ReturnType<ReturnType<typeof otelMetrics>['collect']>,
  outcome: string,
  model = 'Product',
) => (await collect()).value(I.fencedWrites, { [A.model]: model, [A.writeOutcome]: outcome })

describe('fenced writes through OpenTelemetry', () => {
  it("a write the database refuses: the row unchanged, a span `fenced update Product` under the writer's span with both tokens, status ERROR, and one refused write counted", async () => {
    const { db, sku, traces, collect, within } = await setUp()
    expect(await writes(collect, 'refused')).toBe(0)
    await db.$fenced(100n).product.update({ where: { sku }, data: { stock: 9 } })
    const stale = await within('stale holder', async (span) => {
      await expect(db.$fenced(50n).product.update({ where: { sku }, data: { stock: 0 } })).rejects.toBeInstanceOf(
        StaleFencingTokenError,
      )
      return span.spanContext()
    })
    // Where the effect lands: the stale write changed nothing.
    expect(await prisma.product.findUnique({ where: { sku }, select: { stock: true, fenceToken: true } })).toEqual({
      stock: 9,
      fenceToken: 100n,
    })
    const spans = traces.named('fenced update Product')
    expect(spans).toHaveLength(1)
    const [span] = spans
    expect(span!.parentSpanContext?.spanId).toBe(stale.spanId)
    expect(span!.spanContext().traceId).toBe(stale.traceId)
    expect(span!.attributes).toEqual({
      [A.model]: 'Product',
      [A.operation]: 'update',
      [A.writeOutcome]: 'refused',
      [A.writeToken]: '50',
      [A.storedToken]: '100',
      [A.errorType]: 'StaleFencingTokenError',
    })
    expect(span!.status.code).toBe(SpanStatusCode.ERROR)
    expect(await writes(collect, 'refused')).toBe(1)
    expect(await writes(collect, 'accepted')).toBeUndefined()

    // The control: the same stale write without the fence goes through, and nothing reports it.
    await prisma.product.update({ where: { sku }, data: { stock: 0 } })
    expect((await prisma.product.findUnique({ where: { sku } }))?.stock).toBe(0)
    expect(traces.named('fenced update Product')).toHaveLength(1)
    expect(await writes(collect, 'refused')).toBe(1)
  })

  it("an accepted write reported as a FencedWriteReport (what a hook for every write hands over): a span as long as the write, under the writer's span, and one accepted write counted", async () => {
    const { telemetry, db, sku, traces, collect, within } = await setUp()
    // The test plays the fencing package's part: it times a real fenced write and reports it.
    const { parent, report } = await within('holder', async (span) => {
      const start = performance.now()
      await db.$fenced(200n).product.update({ where: { sku }, data: { stock: 8 } })
      const report: FencedWriteReport = {
        model: 'Product',
        operation: 'update',
        token: 200n,
        outcome: 'accepted',
        storedToken: undefined,
        durationMs: performance.now() - start,
      }
      telemetry.onFencedWrite(report)
      return { parent: span.spanContext(), report }
    })
    expect((await prisma.product.findUnique({ where: { sku } }))?.stock).toBe(8)
    const [span] = traces.named('fenced update Product')
    expect(span!.parentSpanContext?.spanId).toBe(parent.spanId)
    expect(span!.attributes).toEqual({
      [A.model]: 'Product',
      [A.operation]: 'update',
      [A.writeOutcome]: 'accepted',
      [A.writeToken]: '200',
    })
    expect(span!.status.code).toBe(SpanStatusCode.UNSET)
    expect(durationMs(span!)).toBeCloseTo(report.durationMs!, 2)
    expect(await writes(collect, 'accepted')).toBe(1)
    expect(await writes(collect, 'refused')).toBe(0)
  })

  it('never throws on a malformed report; an unknown outcome is not counted, a missing model counts as other; traces: false counts without spans', async () => {
    const { telemetry, traces, collect } = await setUp()
    const bad: unknown[] = [
      undefined,
      null,
      {},
      { model: 'Product', outcome: 'maybe' },
      { model: 42, outcome: 'refused', token: 'x', durationMs: -5 },
    ]
    for (const report of bad) {
      expect(() => telemetry.onFencedWrite(report as FencedWriteReport)).not.toThrow()
      expect(() => telemetry.onFencingRejection(report as never)).not.toThrow()
    }
    // Each rejection is a refusal, of `other` when its model is unreadable (4 of them, and the one
    // report saying `refused` of model 42); a report with no readable outcome counts nowhere.
    expect(await writes(collect, 'refused', OTHER_LABEL)).toBe(5)
    expect(await writes(collect, 'refused')).toBe(1)
    expect(
      traces
        .spans()
        .every((s) => s.attributes[A.writeToken] === undefined || typeof s.attributes[A.writeToken] === 'string'),
    ).toBe(true)

    const quiet = await setUp({ traces: false })
    quiet.telemetry.onFencingRejection({ model: 'Product', operation: 'update', token: 1n, storedToken: 2n })
    expect(await writes(quiet.collect, 'refused')).toBe(1)
    expect(quiet.traces.spans()).toEqual([])
  })
})
