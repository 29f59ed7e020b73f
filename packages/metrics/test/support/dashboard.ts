/** Reads the PromQL out of grafana/fencelock.json and makes it runnable outside Grafana. */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

export const DASHBOARD_FILE = join(import.meta.dirname, '..', '..', 'grafana', 'fencelock.json')

export interface Target {
  refId: string
  expr: string
  datasource?: { type?: string; uid?: string }
}
export interface Panel {
  id: number
  type: string
  title: string
  datasource?: { type?: string; uid?: string }
  targets?: Target[]
  panels?: Panel[]
}
export interface Variable {
  name: string
  type: string
  query?: string | { query?: string }
  datasource?: { type?: string; uid?: string }
}
export interface Dashboard {
  uid: string
  title: string
  panels: Panel[]
  templating: { list: Variable[] }
}

export function loadDashboard(): Dashboard {
  return JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as Dashboard
}

/** Every panel, rows' children included. */
export function allPanels(dashboard: Dashboard): Panel[] {
  return dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])])
}

/** Every panel query, with where it comes from. */
export function panelQueries(dashboard: Dashboard): { panel: string; refId: string; expr: string }[] {
  return allPanels(dashboard).flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, refId: t.refId, expr: t.expr })))
}

/**
 * Replaces Grafana's template variables the way Grafana would before sending the query:
 * interval variables (`$__rate_interval`, `$__interval`, `$__range`) by `interval`, dashboard
 * variables (`$job`, `${group}`, `${group:regex}`) by `.*`, what "All" becomes with `allValue`.
 */
export function substituteTemplateVars(expr: string, interval = '1m'): string {
  return expr
    .replace(/\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}/g, interval)
    .replace(/\$\{[a-zA-Z_]\w*(:[a-z]+)?\}|\$[a-zA-Z_]\w*/g, '.*')
}

/**
 * The series selector inside a `label_values(<selector>, <label>)` variable query (Grafana's
 * function, not PromQL); `undefined` for `label_values(<label>)` or other functions.
 */
export function variableSelector(query: string): string | undefined {
  const m = /^label_values\((.+),\s*\w+\)$/s.exec(query.trim())
  return m?.[1]
}
