/** The `group` label: its default, its length bound and the cap on distinct values. */
import { Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { defaultGroupOf, instrument, MAX_LABEL_CHARS, OTHER_LABEL } from '../src/index.js'
import { LabelLimiter, truncateLabel } from '../src/label-limiter.js'
import { labelValues, valueOf } from './support/metric-values.js'
import { connectShared, makeLocker, resourceIn, uniqueGroup } from './support/redis.js'

const redis = await connectShared()

describe('defaultGroupOf', () => {
  it('takes the text before the first colon, never the id after it', () => {
    expect(defaultGroupOf('order:42')).toBe('order')
    expect(defaultGroupOf('order:42:line:7')).toBe('order')
    expect(defaultGroupOf(':42')).toBe('')
    expect(defaultGroupOf('inventory')).toBe('inventory')
  })
})

describe('LabelLimiter', () => {
  it('admits up to max distinct values, then folds new ones into other', () => {
    const limiter = new LabelLimiter()
    expect(limiter.admit('a', 2)).toBe('a')
    expect(limiter.admit('b', 2)).toBe('b')
    expect(limiter.admit('c', 2)).toBe(OTHER_LABEL)
    expect(limiter.admit('a', 2)).toBe('a')
    expect([...limiter.admitted]).toEqual(['a', 'b'])
  })

  it('turns empty strings, non-strings and the literal other into other without using a slot', () => {
    const limiter = new LabelLimiter()
    for (const bad of ['', undefined, null, 42, {}]) expect(limiter.admit(bad, 1)).toBe(OTHER_LABEL)
    expect(limiter.admit(OTHER_LABEL, 1)).toBe(OTHER_LABEL)
    expect(limiter.admitted.size).toBe(0)
  })

  it(`cuts values to ${MAX_LABEL_CHARS} characters without splitting a surrogate pair`, () => {
    expect(truncateLabel('x'.repeat(200))).toBe('x'.repeat(MAX_LABEL_CHARS))
    const emoji = `${'x'.repeat(MAX_LABEL_CHARS - 1)}😀tail`
    const cut = truncateLabel(emoji)
    expect(cut).toBe('x'.repeat(MAX_LABEL_CHARS - 1))
    expect(Buffer.from(cut, 'utf8').toString('utf8')).toBe(cut)
  })
})

describe('the group label of instrument()', () => {
  it('labels order:<id> resources as order, never with the resource itself', async () => {
    const registry = new Registry()
    const locker = makeLocker(redis)
    instrument(locker, { registry })
    const group = uniqueGroup('order')
    const resources = [resourceIn(group), resourceIn(group), resourceIn(group)]
    for (const r of resources) await (await locker.acquire(r)).release()
    const groups = await labelValues(registry, 'fencelock_acquire_total', 'group')
    expect(groups).toEqual(new Set([group]))
    expect(await valueOf(registry, 'fencelock_acquire_total', { group, outcome: 'acquired' })).toBe(3)
    const text = await registry.metrics()
    for (const r of resources) expect(text).not.toContain(r)
  })

  it('caps distinct groups at maxGroups, counting the rest as other, whatever the resources', async () => {
    const registry = new Registry()
    const locker = makeLocker(redis)
    const metrics = instrument(locker, { registry, maxGroups: 3 })
    // Resources without a colon are whole groups: the worst case for the default groupOf.
    const ids = Array.from({ length: 12 }, () => uniqueGroup('nocolon'))
    for (const id of ids) await (await locker.acquire(id)).release()
    const groups = await labelValues(registry, 'fencelock_acquire_total', 'group')
    expect(groups).toEqual(new Set([...ids.slice(0, 3), OTHER_LABEL]))
    expect(await valueOf(registry, 'fencelock_acquire_total', { group: OTHER_LABEL, outcome: 'acquired' })).toBe(9)
    expect(await valueOf(registry, 'fencelock_held', { group: OTHER_LABEL })).toBe(0)
    expect(metrics.groups.size).toBe(3)
  })

  it('cuts a long group to 64 characters', async () => {
    const registry = new Registry()
    const locker = makeLocker(redis)
    instrument(locker, { registry })
    const long = uniqueGroup('long').padEnd(300, 'x')
    await (await locker.acquire(`${long}:1`)).release()
    expect(await labelValues(registry, 'fencelock_acquire_total', 'group')).toEqual(new Set([long.slice(0, 64)]))
  })

  it('uses a custom groupOf, and counts a groupOf that throws or returns a non-string as other', async () => {
    const registry = new Registry()
    const locker = makeLocker(redis)
    const group = uniqueGroup('custom')
    instrument(locker, {
      registry,
      groupOf: (resource) => {
        if (resource.endsWith('!throw')) throw new Error('bad mapping')
        if (resource.endsWith('!number')) return 42 as unknown as string
        return group
      },
    })
    await (await locker.acquire(resourceIn('x'))).release()
    await (await locker.acquire(`${resourceIn('x')}!throw`)).release()
    await (await locker.acquire(`${resourceIn('x')}!number`)).release()
    expect(await valueOf(registry, 'fencelock_acquire_total', { group, outcome: 'acquired' })).toBe(1)
    expect(await valueOf(registry, 'fencelock_acquire_total', { group: OTHER_LABEL, outcome: 'acquired' })).toBe(2)
    expect(await valueOf(registry, 'fencelock_held', { group: OTHER_LABEL })).toBe(0)
  })

  it('creates the series of the groups option at zero before any event', async () => {
    const registry = new Registry()
    const locker = makeLocker(redis)
    const metrics = instrument(locker, { registry, groups: ['order', 'payment'], maxGroups: 2 })
    expect(await valueOf(registry, 'fencelock_acquire_total', { group: 'order', outcome: 'timeout' })).toBe(0)
    expect(await valueOf(registry, 'fencelock_held', { group: 'payment' })).toBe(0)
    expect([...metrics.groups]).toEqual(['order', 'payment'])
    // The cap is full: a third group is other.
    await (await locker.acquire(resourceIn(uniqueGroup('third')))).release()
    expect(await valueOf(registry, 'fencelock_acquire_total', { group: OTHER_LABEL, outcome: 'acquired' })).toBe(1)
  })
})
