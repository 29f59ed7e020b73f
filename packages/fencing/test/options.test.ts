import { PrismaPg } from '@prisma/adapter-pg'
import { describe, expect, it } from 'vitest'
import { FENCING_DEFAULTS, fencing, FencingError, InvalidFencingOptionError } from '../src/index.js'
import { PrismaClient } from './support/database.js'

// No query runs in this file: the adapter connects lazily, and every check here happens before.
const client = () => new PrismaClient({ adapter: new PrismaPg({ connectionString: 'postgresql://nobody@127.0.0.1:1/none' }) })

describe('fencing() options', () => {
  it('has frozen defaults with the units in their names', () => {
    expect(Object.isFrozen(FENCING_DEFAULTS)).toBe(true)
    expect(FENCING_DEFAULTS).toEqual({ maxWaitMs: 2_000, timeoutMs: 5_000 })
  })

  it.each([
    ['no options', undefined],
    ['no models', {}],
    ['an empty models object', { models: {} }],
    ['models as an array', { models: ['Product'] }],
    ['a fence column that is not a string', { models: { Product: 1 } }],
    ['a model name that is not an identifier', { models: { 'Pro duct': 'fenceToken' } }],
    ['an onRejection that is not a function', { models: { Product: 'fenceToken' }, onRejection: 'log' }],
  ])('refuses %s when fencing() is called', (_label, options) => {
    expect(() => fencing(options as never)).toThrow(InvalidFencingOptionError)
  })

  it.each([
    ['model', 'models'],
    ['Models', 'models'],
    ['onRejections', 'onRejection'],
    ['onrejection', 'onRejection'],
  ])('refuses the misspelt option %s, naming it and suggesting %s', (name, suggested) => {
    let error: unknown
    try {
      fencing({ [name]: { Product: 'fenceToken' }, ...(name.toLowerCase().startsWith('model') ? {} : { models: { Product: 'fenceToken' } }) } as never)
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(InvalidFencingOptionError)
    expect(error).toMatchObject({ field: name })
    expect((error as Error).message).toContain(`did you mean ${suggested}?`)
  })

  it('refuses an unknown option with the list of options', () => {
    expect(() => fencing({ models: { Product: 'fenceToken' }, schema: 'x' } as never)).toThrow(/is not an option of fencing\(\) \(the options are models, onRejection, onFencedWrite\)/)
  })

  it('refuses, when applied, a model the client does not have or a fence column that is not BigInt', () => {
    expect(() => client().$extends(fencing({ models: { Nope: 'fenceToken' } }))).toThrow(InvalidFencingOptionError)
    expect(() => client().$extends(fencing({ models: { Product: 'missing' } }))).toThrow(InvalidFencingOptionError)
    let error: unknown
    try {
      client().$extends(fencing({ models: { Product: 'stock' } }))
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(InvalidFencingOptionError)
    expect(error).toBeInstanceOf(FencingError)
    expect(error).toMatchObject({ name: 'InvalidFencingOptionError', field: 'models.Product' })
    expect((error as Error).message).toMatch(/it is Int/)
  })

  it('applies to a client with the demo models and adds $fenced, also on transaction clients', () => {
    const db = client().$extends(fencing({ models: { Product: 'fenceToken', Order: 'fenceToken' } }))
    expect(typeof db.$fenced).toBe('function')
  })
})
