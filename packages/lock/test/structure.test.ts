/**
 * The package's shape (issue 33, "the package for the next person"): the family members and the
 * election take the few operations they need as an interface (core/lock-source.ts), never the
 * Locker itself, so that no two modules import each other (semaphore.ts and locker.ts did); the
 * machinery under the Locker (core/) runs over any LockBackend, and the engine is chosen in one
 * place (backend/create-backend.ts).
 */
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'

const src = join(dirname(fileURLToPath(import.meta.url)), '..', 'src')

it('nothing in core/, family/ or election/ imports locker.ts (not even its types)', () => {
  const offenders: string[] = []
  for (const folder of ['core', 'family', 'election']) {
    for (const file of readdirSync(join(src, folder))) {
      const text = readFileSync(join(src, folder, file), 'utf8')
      if (/from '\.\.\/locker\.js'/.test(text)) offenders.push(`${folder}/${file}`)
    }
  }
  expect(offenders).toEqual([])
})

it('control: locker.ts itself is found importing the family (the check reads real imports)', () => {
  expect(readFileSync(join(src, 'locker.ts'), 'utf8')).toMatch(/from '\.\/family\/semaphore\.js'/)
})

it('the Locker chooses its engine in one place: only backend/create-backend.ts makes a backend', () => {
  const makers: string[] = []
  const walk = (dir: string, rel: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path, `${rel}${entry.name}/`)
      else if (/new (Quorum|Redis)Backend\(/.test(readFileSync(path, 'utf8'))) makers.push(`${rel}${entry.name}`)
    }
  }
  walk(src, '')
  // The quorum backend makes one single-node backend per node: its own business, below the seam.
  expect(makers.sort()).toEqual(['backend/create-backend.ts', 'quorum/quorum-backend.ts'])
})
