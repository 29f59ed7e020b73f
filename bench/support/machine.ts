// The machine a benchmark ran on, as written next to its numbers.
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
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

/** Jiffies per second of /proc's CPU times (USER_HZ, 100 on Linux). */
const USER_HZ = 100

/**
 * CPU seconds one process has used (user + system), from /proc/<pid>/stat; NaN where unknown
 * (not Linux, or the process is gone).
 */
export function processCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // After the command name in parentheses: state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) / USER_HZ
  } catch {
    return Number.NaN
  }
}

/** Every descendant process of `pid` (children, their children, ...), from /proc; empty where unknown. */
export function descendantPids(pid: number): number[] {
  const found: number[] = []
  const visit = (parent: number) => {
    let tasks: string[] = []
    try {
      tasks = readdirSync(`/proc/${parent}/task`)
    } catch {
      return
    }
    for (const task of tasks) {
      let children = ''
      try {
        children = readFileSync(`/proc/${parent}/task/${task}/children`, 'utf8')
      } catch {
        continue
      }
      for (const child of children.split(' ').filter(Boolean).map(Number)) {
        found.push(child)
        visit(child)
      }
    }
  }
  visit(pid)
  return found
}

/** CPU seconds all CPUs have been busy and in all since boot, from /proc/stat; undefined where unknown. */
export function machineCpuSeconds(): { busy: number; total: number } | undefined {
  const t = cpuTimes()
  return t && { busy: t.busy / USER_HZ, total: t.total / USER_HZ }
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
