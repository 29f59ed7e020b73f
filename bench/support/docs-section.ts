// Writes one marked section of docs/BENCHMARKS.md and leaves every other section as it is.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs'

const HEADER = `# Benchmarks

Each section is written by its benchmark script between its own markers; run the command in the
section to refresh it. Numbers are only comparable within one section (same run, same machine).
`

/**
 * Replaces the text between `<!-- <name>:start -->` and `<!-- <name>:end -->` with `body`, or
 * appends the marked section when it is missing; creates the file with a short header if needed.
 * Written beside and renamed, so another benchmark writing its own section never sees half a file.
 */
export function writeMarkedSection(file: string, name: string, body: string): void {
  const start = `<!-- ${name}:start -->`
  const end = `<!-- ${name}:end -->`
  const section = `${start}\n${body.trim()}\n${end}`
  const text = existsSync(file) ? readFileSync(file, 'utf8') : HEADER
  const i = text.indexOf(start)
  const j = text.indexOf(end)
  let next: string
  if (i >= 0 && j > i) next = text.slice(0, i) + section + text.slice(j + end.length)
  else if (i >= 0 || j >= 0) throw new Error(`${file}: unbalanced ${name} markers; fix them by hand`)
  else next = `${text.replace(/\n*$/, '\n\n')}${section}\n`
  const tmp = `${file}.${process.pid}.tmp`
  writeFileSync(tmp, next)
  renameSync(tmp, file)
}
