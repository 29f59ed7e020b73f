/** Reads metric values out of a prom-client registry, by name and labels. */
import type { Registry, RegistryContentType } from 'prom-client'

export type Labels = Record<string, string>

interface Sample {
  labels: Record<string, string | number>
  value: number
  metricName?: string
}

async function samples(registry: Registry<RegistryContentType>, name: string): Promise<Sample[]> {
  const metric = registry.getSingleMetric(name)
  if (!metric) throw new Error(`metric ${name} is not registered`)
  return (await metric.get()).values as Sample[]
}

function matches(sample: Sample, labels: Labels): boolean {
  return Object.entries(labels).every(([k, v]) => String(sample.labels[k]) === v)
}

/**
 * The value of a counter or gauge series, `undefined` when the series does not exist.
 * Throws when `labels` match more than one series.
 */
export async function valueOf(registry: Registry<RegistryContentType>, name: string, labels: Labels = {}): Promise<number | undefined> {
  const found = (await samples(registry, name)).filter((s) => matches(s, labels))
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${found.length} series`)
  return found[0]?.value
}

/** Count, sum and cumulative buckets of one histogram series; `undefined` when it does not exist. */
export async function histogramOf(
  registry: Registry<RegistryContentType>,
  name: string,
  labels: Labels,
): Promise<{ count: number; sum: number; buckets: Map<string, number> } | undefined> {
  const all = (await samples(registry, name)).filter((s) => matches(s, labels))
  if (all.length === 0) return undefined
  const buckets = new Map<string, number>()
  let count = Number.NaN
  let sum = Number.NaN
  for (const s of all) {
    if (s.metricName === `${name}_count`) count = s.value
    else if (s.metricName === `${name}_sum`) sum = s.value
    else if (s.metricName === `${name}_bucket`) buckets.set(String(s.labels.le), s.value)
  }
  return { count, sum, buckets }
}

/** Every distinct value of `label` across the series of `name`. */
export async function labelValues(registry: Registry<RegistryContentType>, name: string, label: string): Promise<Set<string>> {
  return new Set((await samples(registry, name)).map((s) => s.labels[label]).filter((v) => v !== undefined).map(String))
}
