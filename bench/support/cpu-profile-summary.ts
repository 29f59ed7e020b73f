// Summarises a V8 .cpuprofile (from `npm run bench:lock -- --cpu-prof <dir>`): self time by
// function and by package, so the cost of a contender's client side can be read off per op.
//   node --import tsx bench/support/cpu-profile-summary.ts <file.cpuprofile> [top=25]
import { readFileSync } from 'node:fs'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}
interface Profile {
  nodes: ProfileNode[]
  startTime: number
  endTime: number
  samples: number[]
  timeDeltas: number[]
}

const file = process.argv[2]
if (!file) throw new Error('usage: cpu-profile-summary.ts <file.cpuprofile> [top]')
const top = Number(process.argv[3] ?? 25)
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile
const byId = new Map(profile.nodes.map((n) => [n.id, n]))
const selfUs = new Map<number, number>()
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i]!
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
}
const total = [...selfUs.values()].reduce((a, b) => a + b, 0)

function where(url: string): string {
  if (url === '') return '(native/vm)'
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (m) return m[1]!
  if (url.startsWith('node:')) return 'node:' + url.slice(5).split('/')[0]
  if (url.includes('/packages/lock/')) return '@fencelock/lock'
  if (url.includes('/bench/')) return 'bench harness'
  return url
}

const byFn = new Map<string, number>()
const byPkg = new Map<string, number>()
for (const [id, us] of selfUs) {
  const n = byId.get(id)!
  const f = n.callFrame
  const short = f.url.split('/').slice(-2).join('/')
  const key = `${f.functionName || '(anonymous)'}  ${short}:${f.lineNumber + 1}`
  byFn.set(key, (byFn.get(key) ?? 0) + us)
  const pkg = where(f.url)
  byPkg.set(pkg, (byPkg.get(pkg) ?? 0) + us)
}
const show = (m: Map<string, number>, k: number) =>
  [...m.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, k)
    .map(([name, us]) => `${((us / total) * 100).toFixed(1).padStart(5)} %  ${(us / 1000).toFixed(0).padStart(6)} ms  ${name}`)
    .join('\n')
console.log(`${file}: ${(total / 1000).toFixed(0)} ms sampled\n\nby package:\n${show(byPkg, 15)}\n\nby function (self):\n${show(byFn, top)}`)
