// The flash-sale command line: defaults, every flag, and a clear error for each bad value;
// the exit code rule; and the CLI's exit code 2 on a bad command line (no services needed).
import { spawnSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { parseFlashSaleArgs, UsageError } from '../src/flash-sale-args.js'
import { exitCodeOf, FLASH_SALE_DEFAULTS, percentile } from '../src/flash-sale.js'

describe('parseFlashSaleArgs', () => {
  it('takes the defaults, and the issue example', () => {
    expect(parseFlashSaleArgs([]).options).toMatchObject({ ...FLASH_SALE_DEFAULTS, keepData: false })
    const command = parseFlashSaleArgs('--instances 4 --buyers 2000 --stock 100 --mode fenced --chaos pause --seed 7 --json'.split(' '))
    expect(command.json).toBe(true)
    expect(command.options).toMatchObject({ instances: 4, buyers: 2000, stock: 100, mode: 'fenced', chaos: 'pause', seed: 7 })
    expect(parseFlashSaleArgs(['--chaos', 'kill']).options.chaos).toBe('kill')
    expect(parseFlashSaleArgs(['--mode=lock', '--ttl-ms=500', '--gateway-latency-ms=10-20']).options).toMatchObject({ mode: 'lock', ttlMs: 500, gatewayLatencyMs: '10-20' })
    expect(parseFlashSaleArgs([]).options.redis).toBe('single')
    expect(parseFlashSaleArgs(['--redis', 'sentinel']).options.redis).toBe('sentinel')
    expect(parseFlashSaleArgs([]).options.backend).toBe('redis')
    expect(parseFlashSaleArgs(['--backend', 'etcd']).options.backend).toBe('etcd')
  })

  it.each([
    [['--instances', '0'], /--instances must be an integer from 1 to 16/],
    [['--instances', '4.5'], /--instances/],
    [['--buyers', '-3'], /--buyers needs a value|--buyers must be/],
    [['--stock', 'lots'], /--stock must be an integer/],
    [['--mode', 'safe'], /--mode must be one of unsafe, lock, fenced/],
    [['--chaos', 'explode'], /--chaos must be one of none, pause, redis-restart, kill/],
    [['--seed'], /--seed needs a value/],
    [['--seed', '--json'], /--seed needs a value/],
    [['--gateway-latency-ms', '80-30'], /max 30 is below min 80/],
    [['--ttl-ms', '5'], /--ttl-ms must be an integer from 100/],
    [['--stock', '1', '--stock', '2'], /given twice/],
    [['--json=yes'], /takes no value/],
    [['--frobnicate'], /unknown option/],
    [['--redis', 'cluster'], /--redis must be one of single, sentinel/],
    [['--backend', 'zookeeper'], /--backend must be one of redis, etcd/],
  ])('refuses %j', (argv, message) => {
    expect(() => parseFlashSaleArgs(argv)).toThrow(UsageError)
    expect(() => parseFlashSaleArgs(argv)).toThrow(message)
  })
})

describe('the report rules', () => {
  it('exits 1 only for a violation in fenced mode', () => {
    expect(exitCodeOf({ violations: 1, options: { mode: 'fenced' } })).toBe(1)
    expect(exitCodeOf({ violations: 0, options: { mode: 'fenced' } })).toBe(0)
    expect(exitCodeOf({ violations: 9, options: { mode: 'lock' } })).toBe(0)
    expect(exitCodeOf({ violations: 9, options: { mode: 'unsafe' } })).toBe(0)
  })

  it('takes the nearest-rank P99', () => {
    expect(percentile([], 99)).toBeNull()
    expect(percentile(Array.from({ length: 100 }, (_, i) => i + 1), 99)).toBe(99)
    expect(percentile([5, 1, 3], 99)).toBe(5)
  })
})

describe('the CLI', () => {
  it('exits 2 with the message and the usage on a bad command line, before starting anything', () => {
    const cli = join(dirname(fileURLToPath(import.meta.url)), '..', 'src', 'flash-sale-cli.ts')
    const result = spawnSync(process.execPath, ['--import', 'tsx', cli, '--mode', 'yolo'], { encoding: 'utf8', timeout: 60_000 })
    expect(result.status).toBe(2)
    expect(result.stderr).toContain('--mode must be one of unsafe, lock, fenced')
    expect(result.stderr).toContain('Usage: npm run flash-sale')
    expect(result.stdout).toBe('')
  })
})
