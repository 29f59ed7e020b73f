// `node scripts/ensure-system.mjs <test|demo>`: makes this machine ready for `npm test` or
// `npm run demo` before either starts, so the README's two commands work on a fresh Debian
// machine: the Debian packages they use are installed when missing (as root, with apt-get), and
// Redis and PostgreSQL are started when they are down (with the commands the machine uses).
// Not root and something missing: one message naming the packages and the command, exit 1,
// before any test runs. Everything it prints goes to stderr (stdout stays the command's, e.g.
// `npm run -s flash-sale -- --json`). Quiet when there is nothing to do.
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync } from 'node:fs'
import { connect } from 'node:net'

const purpose = process.argv[2]
if (purpose !== 'test' && purpose !== 'demo') {
  process.stderr.write('usage: node scripts/ensure-system.mjs <test|demo>\n')
  process.exit(2)
}
const log = (line) => process.stderr.write(`[setup] ${line}\n`)
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0
const onPath = (command) => spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0

/** What each purpose needs: a Debian package, and how to tell it is there. */
const NEEDS = {
  test: [
    { pkg: 'redis-server', why: 'tests spawn their own redis-servers', present: () => onPath('redis-server') },
    { pkg: 'prometheus', why: 'promtool and prometheus check the alert rules and the dashboard', present: () => onPath('promtool') && onPath('prometheus') },
    { pkg: 'chromium', why: 'the dashboard end-to-end test', present: () => onPath('chromium') },
    { pkg: 'docker-compose', why: 'docker-compose config -q checks the compose file', present: () => onPath('docker-compose') },
    {
      pkg: 'faketime',
      why: 'the chaos clock-jump fault',
      present: () => existsSync('/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1') || existsSync('/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1'),
    },
  ],
  // The demo spawns redis-server when nothing answers on 6379, and embeds PostgreSQL (PGlite).
  demo: [{ pkg: 'redis-server', why: 'the demo spawns one when no Redis answers', present: () => onPath('redis-server') }],
}

const missing = NEEDS[purpose].filter((n) => !n.present())
if (missing.length > 0) {
  const pkgs = missing.map((n) => n.pkg)
  if (!isRoot || !onPath('apt-get')) {
    log(`npm ${purpose === 'test' ? 'test' : 'run demo'} needs Debian packages that are missing:`)
    for (const n of missing) log(`  ${n.pkg.padEnd(18)} ${n.why}`)
    log(`install them, then run the command again:\n\n    sudo apt-get update && sudo apt-get install -y --no-install-recommends ${pkgs.join(' ')}\n`)
    process.exit(1)
  }
  log(`installing ${pkgs.join(', ')} (apt-get)`)
  const apt = (args) => execFileSync('apt-get', args, { stdio: ['ignore', process.stderr, process.stderr], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
  apt(['update', '-qq'])
  apt(['install', '-y', '-qq', '--no-install-recommends', ...pkgs])
  const still = missing.filter((n) => !n.present())
  if (still.length > 0) {
    log(`still missing after apt-get: ${still.map((n) => n.pkg).join(', ')}`)
    process.exit(1)
  }
}

/** True when something accepts TCP connections on host:port within `ms`. */
function answers(host, port, ms = 1_000) {
  return new Promise((resolve) => {
    const socket = connect({ host, port })
    const done = (ok) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(ms, () => done(false))
    socket.once('connect', () => done(true))
    socket.once('error', () => done(false))
  })
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function waitFor(host, port, what) {
  for (let i = 0; i < 60; i++) {
    if (await answers(host, port)) return
    await sleep(500)
  }
  log(`${what} did not come up on ${host}:${port} within 30 s`)
  process.exit(1)
}

if (purpose === 'test') {
  // Only the default addresses are started here; REDIS_URL / DATABASE_URL elsewhere are the
  // caller's to run.
  if (!process.env.REDIS_URL && !(await answers('127.0.0.1', 6379))) {
    const start = 'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log'
    if (!isRoot) {
      log(`Redis does not answer on 127.0.0.1:6379; start it (or set REDIS_URL):\n\n    ${start}\n`)
      process.exit(1)
    }
    log('starting Redis on 127.0.0.1:6379')
    mkdirSync('/var/lib/redis', { recursive: true })
    mkdirSync('/var/log/redis', { recursive: true })
    execFileSync('sh', ['-c', start], { stdio: ['ignore', process.stderr, process.stderr] })
    await waitFor('127.0.0.1', 6379, 'Redis')
  }
  if (!process.env.DATABASE_URL && !(await answers('127.0.0.1', 5432))) {
    const versions = existsSync('/etc/postgresql') ? readdirSync('/etc/postgresql') : []
    const start = `pg_ctlcluster --skip-systemctl-redirect ${versions[0] ?? '<version>'} main start`
    if (!isRoot || versions.length === 0) {
      log(`PostgreSQL does not answer on 127.0.0.1:5432; start it (or set DATABASE_URL):\n\n    ${start}\n`)
      process.exit(1)
    }
    log('starting PostgreSQL on 127.0.0.1:5432')
    execFileSync('sh', ['-c', start], { stdio: ['ignore', process.stderr, process.stderr] })
    await waitFor('127.0.0.1', 5432, 'PostgreSQL')
  }
}
