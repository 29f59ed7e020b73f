// Parsing of `INFO` replies and the deltas the benchmark reports.

/** `INFO` text as field -> value (section headers and blank lines dropped). */
export function parseInfo(text: string): Map<string, string> {
  const fields = new Map<string, string>()
  for (const line of text.split(/\r?\n/)) {
    if (line === '' || line.startsWith('#')) continue
    const i = line.indexOf(':')
    if (i > 0) fields.set(line.slice(0, i), line.slice(i + 1))
  }
  return fields
}

/** One command's counters from `INFO commandstats`. */
export interface CommandStat {
  calls: number
  usec: number
}

/** `cmdstat_<name>:calls=..,usec=..,...` lines as name -> counters. */
export function parseCommandStats(text: string): Map<string, CommandStat> {
  const stats = new Map<string, CommandStat>()
  for (const [field, value] of parseInfo(text)) {
    if (!field.startsWith('cmdstat_')) continue
    const kv = new Map(value.split(',').map((pair) => pair.split('=') as [string, string]))
    stats.set(field.slice('cmdstat_'.length), { calls: Number(kv.get('calls') ?? 0), usec: Number(kv.get('usec') ?? 0) })
  }
  return stats
}

/**
 * What happened on the server between two `INFO commandstats` + `INFO cpu` snapshots.
 * `exclude` drops the harness's own commands (its `INFO` calls).
 */
export interface ServerDelta {
  /** Calls per command name, including commands run inside Lua scripts. */
  calls: Record<string, number>
  /** Microseconds spent per command name (Redis's own accounting). */
  usec: Record<string, number>
  totalCalls: number
  /** Redis process CPU (user + sys) in microseconds. */
  cpuUsec: number
}

export interface ServerSnapshot {
  commands: Map<string, CommandStat>
  cpuSec: number
}

export function parseSnapshot(text: string): ServerSnapshot {
  const info = parseInfo(text)
  const cpuSec = Number(info.get('used_cpu_user') ?? 0) + Number(info.get('used_cpu_sys') ?? 0)
  return { commands: parseCommandStats(text), cpuSec }
}

export function serverDelta(before: ServerSnapshot, after: ServerSnapshot, exclude: readonly string[] = ['info']): ServerDelta {
  const calls: Record<string, number> = {}
  const usec: Record<string, number> = {}
  let totalCalls = 0
  for (const [name, stat] of after.commands) {
    if (exclude.includes(name)) continue
    const prev = before.commands.get(name) ?? { calls: 0, usec: 0 }
    const dc = stat.calls - prev.calls
    if (dc <= 0) continue
    calls[name] = dc
    usec[name] = stat.usec - prev.usec
    totalCalls += dc
  }
  return { calls, usec, totalCalls, cpuUsec: Math.round((after.cpuSec - before.cpuSec) * 1e6) }
}
