// What can be stated about the page's layout, measured in the browser: no two text labels of a
// chart overlap, every form control has an accessible name, no placeholder is cut. Each finding
// names the element, so a failure says what to look at.
import type { Page } from 'playwright-core'

/** What {@link layoutFindings} found wrong; empty lists when nothing. */
export interface LayoutFindings {
  /** Pairs of chart labels whose boxes intersect or touch: `"$249.95" (overcharged) × "$0.00" (overcharged)`. */
  readonly overlappingLabels: string[]
  /** Controls with no `<label for>`, no `aria-label` and no `aria-labelledby` text. */
  readonly unlabelledControls: string[]
  /** Empty inputs whose placeholder is wider than the input's room for text. */
  readonly truncatedPlaceholders: string[]
  /** Selects too narrow for the option they show ("Pause a lock holde"). */
  readonly truncatedSelects: string[]
}

/** The width Chromium's number input keeps for its spin buttons (measured: 15 px at 14 px type). */
const SPIN_BUTTON_PX = 16
/** The least space between two chart labels, in CSS px. */
const MIN_GAP_PX = 2

/** Measures the page as it is now. */
export function layoutFindings(page: Page): Promise<LayoutFindings> {
  return page.evaluate(
    ([spinPx, gapPx]) => {
      const describe = (el: Element) => {
        const id = el.id ? `#${el.id}` : ''
        const name = el.getAttribute('aria-label') ?? el.getAttribute('name') ?? ''
        return `${el.tagName.toLowerCase()}${id}${name ? `[${name}]` : ''}`
      }

      // Chart labels: the text of every SVG, and the labels of every HTML chart (`[data-chart]`, its
      // `.chart-label`s) — uPlot draws its axes on a canvas, which lays them out itself. A box is the
      // rendered one, in CSS pixels.
      const overlappingLabels: string[] = []
      for (const chart of document.querySelectorAll('svg, [data-chart]')) {
        const labels = [...chart.querySelectorAll(chart instanceof SVGElement ? 'text' : '.chart-label')]
          .filter((t) => (t.textContent ?? '').trim() !== '')
          .map((t) => ({
            text: (t.textContent ?? '').trim(),
            box: t.getBoundingClientRect(),
            where: t.closest('[data-figure]')?.getAttribute('data-figure') ?? chart.getAttribute('data-chart') ?? 'svg',
          }))
          .filter((l) => l.box.width > 0 && l.box.height > 0)
        for (let i = 0; i < labels.length; i++) {
          for (let j = i + 1; j < labels.length; j++) {
            const a = labels[i] as (typeof labels)[number]
            const b = labels[j] as (typeof labels)[number]
            // Apart by at least MIN_GAP_PX one way or the other: labels that touch read as one ("$249.95$0.00").
            const apart =
              a.box.right + gapPx <= b.box.left ||
              b.box.right + gapPx <= a.box.left ||
              a.box.bottom + gapPx <= b.box.top ||
              b.box.bottom + gapPx <= a.box.top
            if (!apart) overlappingLabels.push(`"${a.text}" (${a.where}) × "${b.text}" (${b.where})`)
          }
        }
      }

      const unlabelledControls: string[] = []
      for (const el of document.querySelectorAll<HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement>(
        'input, select, textarea',
      )) {
        if (el instanceof HTMLInputElement && el.type === 'hidden') continue
        const byLabel = [...(el.labels ?? [])].some((l) => (l.textContent ?? '').trim() !== '')
        const byAria = (el.getAttribute('aria-label') ?? '').trim() !== ''
        const byIds = (el.getAttribute('aria-labelledby') ?? '')
          .split(/\s+/)
          .some((id) => id !== '' && (document.getElementById(id)?.textContent ?? '').trim() !== '')
        if (!byLabel && !byAria && !byIds) unlabelledControls.push(describe(el))
      }

      // A placeholder is measured as the input would show it as a value: a number input's own
      // digits where it is numeric, else the text in a text input of the same box, less the room a
      // number input keeps for its spin buttons. The value is put back as it was (React never sees it).
      const truncatedPlaceholders: string[] = []
      for (const el of document.querySelectorAll<HTMLInputElement>('input[placeholder]')) {
        if (el.value !== '' || el.placeholder === '' || el.getClientRects().length === 0) continue
        const type = el.type
        const numeric = type !== 'number' || /^-?\d+(\.\d+)?$/.test(el.placeholder)
        if (!numeric) el.type = 'text'
        el.value = el.placeholder
        const over = el.scrollWidth - el.clientWidth + (numeric ? 0 : spinPx)
        el.value = ''
        el.type = type
        if (over > 0)
          truncatedPlaceholders.push(
            `${describe(el)} "${el.placeholder}" (${over} px too wide for ${el.clientWidth} px)`,
          )
      }
      // A select shows its chosen option cut when it is narrower than a select of the same style
      // holding that option alone, at its natural width (its text, padding and arrow).
      const truncatedSelects: string[] = []
      for (const el of document.querySelectorAll('select')) {
        const shown = el.selectedOptions[0]?.textContent ?? ''
        if (shown === '' || el.getClientRects().length === 0 || el.parentElement === null) continue
        const natural = el.cloneNode(false) as HTMLSelectElement
        natural.removeAttribute('id')
        natural.append(new Option(shown))
        Object.assign(natural.style, {
          position: 'absolute',
          visibility: 'hidden',
          width: 'auto',
          minWidth: '0',
          maxWidth: 'none',
          flex: 'none',
        })
        el.parentElement.append(natural)
        const over = Math.ceil(natural.getBoundingClientRect().width - el.getBoundingClientRect().width)
        natural.remove()
        if (over > 0) truncatedSelects.push(`${describe(el)} "${shown}" (${over} px too wide)`)
      }
      return { overlappingLabels, unlabelledControls, truncatedPlaceholders, truncatedSelects }
    },
    [SPIN_BUTTON_PX, MIN_GAP_PX] as const,
  )
}

/**
 * Waits, up to 5 s, for the page to fit `width`: the charts follow a new width from a
 * ResizeObserver, in a later frame, and a loaded machine measured pages before it (clean-clone CI
 * runs: a 1280 px chart at 1024, scrollWidth 1078; the empty view at 390, 422). A page that never
 * fits is left as it is, for the caller's measurement to fail.
 */
export async function waitToFit(page: Page, width: number): Promise<void> {
  await page
    .waitForFunction((w) => document.documentElement.scrollWidth <= w, width, { timeout: 5_000 })
    .catch(() => {})
}
