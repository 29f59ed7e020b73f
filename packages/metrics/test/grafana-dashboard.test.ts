/**
 * grafana/fencelock.json: the panels the issue asks for, a datasource variable that every panel
 * uses, and PromQL that a real Prometheus accepts (template variables substituted as Grafana would).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { allPanels, loadDashboard, panelQueries, substituteTemplateVars, variableSelector } from './support/dashboard.js'
import { startPrometheus, type PrometheusServer } from './support/prometheus-server.js'

const dashboard = loadDashboard()

describe('grafana/fencelock.json', () => {
  it('has a Prometheus datasource variable that every panel and query uses', () => {
    const ds = dashboard.templating.list.find((v) => v.type === 'datasource')
    expect(ds?.name).toBe('datasource')
    expect(ds?.query).toBe('prometheus')
    for (const panel of allPanels(dashboard)) {
      expect(panel.datasource?.uid, panel.title).toBe('${datasource}')
      for (const t of panel.targets ?? []) expect(t.datasource?.uid, `${panel.title} ${t.refId}`).toBe('${datasource}')
    }
    for (const v of dashboard.templating.list.filter((v) => v.type === 'query')) expect(v.datasource?.uid, v.name).toBe('${datasource}')
  })

  it('has the panels the issue lists, each with a query on its metric, and unique ids', () => {
    const byTitle = new Map(allPanels(dashboard).map((p) => [p.title, (p.targets ?? []).map((t) => t.expr).join('\n')]))
    const wanted: [string, RegExp][] = [
      ['Acquire rate by outcome', /sum by \(outcome\) \(rate\(fencelock_acquire_total\{/],
      ['Acquire success ratio', /outcome="acquired"/],
      ['Wait P50 / P99', /histogram_quantile\(0\.5,[\s\S]*histogram_quantile\(0\.99, .*fencelock_wait_seconds_bucket/],
      ['Hold P99', /histogram_quantile\(0\.99, .*fencelock_hold_seconds_bucket/],
      ['Expiry ratio', /fencelock_release_total\{.*outcome="expired"\}.*fencelock_lost_total/],
      ['Lost locks', /fencelock_lost_total/],
      ['Fencing rejections', /fencelock_fencing_rejections_total/],
      ['Held locks', /fencelock_held\{/],
      ['Leaders', /sum by \(group\) \(fencelock_is_leader\{/],
      ['Leader changes', /increase\(fencelock_leader_changes_total\{/],
    ]
    for (const [title, query] of wanted) expect(byTitle.get(title), title).toMatch(query)
    const ids = allPanels(dashboard).map((p) => p.id)
    expect(new Set(ids).size).toBe(ids.length)
  })

  it('gives rates the unit ops (operations per second), never web units such as reqps', () => {
    const unitOf = (p: object) => (p as { fieldConfig?: { defaults?: { unit?: string } } }).fieldConfig?.defaults?.unit
    expect(allPanels(dashboard).map(unitOf)).not.toContain('reqps')
    let rates = 0
    for (const panel of allPanels(dashboard)) {
      const queries = (panel.targets ?? []).map((t) => (t as { expr?: string }).expr ?? '').join(' ')
      // A panel of plain per-second rates (not a ratio, not a quantile) counts operations.
      if (/rate\(/.test(queries) && !/histogram_quantile|\//.test(queries)) {
        rates++
        expect(unitOf(panel), panel.title).toBe('ops')
      }
    }
    expect(rates).toBeGreaterThanOrEqual(3)
  })

  it('uses $__rate_interval for every rate() and filters by $job and $group', () => {
    for (const { panel, expr } of panelQueries(dashboard)) {
      for (const window of expr.matchAll(/\[([^\]]+)\]/g)) expect(window[1], panel).toBe('$__rate_interval')
      expect(expr, panel).toContain('job=~"$job"')
      if (!expr.includes('fencing_rejections')) expect(expr, panel).toContain('group=~"$group"')
    }
  })

  describe('against a real Prometheus', () => {
    let prometheus: PrometheusServer
    beforeAll(async () => {
      prometheus = await startPrometheus({ config: 'global:\n  scrape_interval: 15s\n' })
    })
    afterAll(async () => {
      await prometheus?.stop()
    })

    it('rejects broken PromQL (the check below can fail)', async () => {
      const res = await prometheus.api('query', { query: 'sum by (group (rate(fencelock_held[1m]))' }, 'POST')
      expect(res.status).toBe('error')
      expect(res.errorType).toBe('bad_data')
    })

    it('accepts every panel query', async () => {
      const queries = panelQueries(dashboard)
      expect(queries.length).toBeGreaterThanOrEqual(9)
      for (const { panel, refId, expr } of queries) {
        const query = substituteTemplateVars(expr)
        expect(query, `${panel} ${refId}: a template variable is left`).not.toContain('$')
        const res = await prometheus.api('query', { query }, 'POST')
        expect(res.status, `${panel} ${refId}: ${res.error ?? ''}\n${query}`).toBe('success')
      }
    })

    it('accepts the series selector of every variable query', async () => {
      for (const v of dashboard.templating.list.filter((v) => v.type === 'query')) {
        const text = typeof v.query === 'string' ? v.query : (v.query?.query ?? '')
        const selector = variableSelector(text)
        expect(selector, `${v.name}: ${text}`).toBeDefined()
        const res = await prometheus.api('series', { 'match[]': substituteTemplateVars(selector!) }, 'POST')
        expect(res.status, `${v.name}: ${res.error ?? ''}`).toBe('success')
      }
    })
  })
})
