// The machine a benchmark ran on, as written next to its numbers.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { availableParallelism, loadavg, totalmem } from 'node:os'

export interface MachineInfo {
  nproc: number
  cpuModel: string
  totalMemGiB: number
  node: string
  redisServer: string
  os: string
}

export function machineInfo(redisBin = process.env.REDIS_SERVER_BIN ?? 'redis-server'): MachineInfo {
  let cpuModel = 'unknown'
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('model name'))
    if (line) cpuModel = line.slice(line.indexOf(':') + 1).trim()
  } catch {
    // Not Linux: leave it unknown rather than guess.
  }
  let redisServer = 'unknown'
  try {
    const out = execFileSync(redisBin, ['--version'], { encoding: 'utf8' })
    redisServer = /v=(\S+)/.exec(out)?.[1] ?? out.trim()
  } catch {
    // Reported as unknown; startRedisServer fails loudly anyway.
  }
  let os = `${process.platform} ${process.arch}`
  try {
    const pretty = /^PRETTY_NAME="?([^"\n]+)"?/m.exec(readFileSync('/etc/os-release', 'utf8'))?.[1]
    if (pretty) os = `${pretty} (${process.arch})`
  } catch {
    // Keep the platform string.
  }
  return {
    nproc: availableParallelism(),
    cpuModel,
    totalMemGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    redisServer,
    os,
  }
}

/** The 1, 5 and 15 minute load averages, as `uptime` prints them. */
export function loadAverage(): string {
  return loadavg()
    .map((l) => l.toFixed(2))
    .join(', ')
}

function cpuTimes(): { busy: number; total: number } | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!
    // cpu  user nice system idle iowait irq softirq steal guest guest_nice (jiffies)
    const [, ...fields] = line.trim().split(/\s+/)
    const n = fields.slice(0, 8).map(Number)
    const total = n.reduce((a, b) => a + b, 0)
    return { busy: total - n[3]! - n[4]!, total }
  } catch {
    return undefined
  }
}

/**
 * Share of all CPUs busy (0..1) over the next `ms`, from /proc/stat; steal counts as busy. Taken
 * while the benchmark runs nothing, it is what other processes leave us. NaN where unknown.
 */
export async function cpuBusyShare(ms = 1000): Promise<number> {
  const a = cpuTimes()
  await new Promise((resolve) => setTimeout(resolve, ms))
  const b = cpuTimes()
  if (!a || !b || b.total === a.total) return Number.NaN
  return (b.busy - a.busy) / (b.total - a.total)
}
