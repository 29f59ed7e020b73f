// `node scripts/ensure-system.mjs <test|demo> [the command's arguments]`: makes this machine ready
// for `npm test` or `npm run demo` before either starts, so the README's two commands work on a
// fresh Debian machine: the Debian packages they use are installed when missing (as root, with
// apt-get), and Redis and PostgreSQL are started when they are down (with the commands the machine
// uses). Then the database the tests use (DATABASE_URL, else the default address) must let them
// in: a missing database or role, or a password the URL does not give, is said with the commands
// that fix it. Not root and something missing: one message naming everything that is missing and
// the commands, exit 1, before any test runs. With `--help` or `-h` among the command's arguments
// it does nothing: the usage needs no service. Everything it prints goes to stderr (stdout stays
// the command's, e.g. `npm run -s flash-sale -- --json`). Quiet when there is nothing to do.
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync } from 'node:fs'
import { connect } from 'node:net'

const [purpose, ...commandArgs] = process.argv.slice(2)
if (purpose !== 'test' && purpose !== 'demo') {
  process.stderr.write('usage: node scripts/ensure-system.mjs <test|demo> [the command\'s arguments]\n')
  process.exit(2)
}
if (commandArgs.includes('--help') || commandArgs.includes('-h')) process.exit(0)

const log = (line) => process.stderr.write(`[setup] ${line}\n`)
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0
const sudo = isRoot ? '' : 'sudo '
const asPostgres = isRoot ? 'runuser -u postgres -- ' : 'sudo -u postgres '
const onPath = (command) => spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0
const command = `npm ${purpose === 'test' ? 'test' : 'run demo'}`
/** What is missing and what to do about it, printed together at the end. */
const problems = []

/** What each purpose needs: a Debian package, and how to tell it is there. */
const NEEDS = {
  test: [
    { pkg: 'redis-server', why: 'tests spawn their own redis-servers', present: () => onPath('redis-server') },
    { pkg: 'prometheus', why: 'promtool and prometheus check the alert rules and the dashboard', present: () => onPath('promtool') && onPath('prometheus') },
    { pkg: 'chromium', why: 'the dashboard end-to-end test', present: () => onPath('chromium') },
    { pkg: 'docker-compose', why: 'docker-compose config -q checks the compose file', present: () => onPath('docker-compose') },
    { pkg: 'procps', why: 'pgrep: the chaos suite checks that no process is left behind', present: () => onPath('pgrep') },
    {
      pkg: 'faketime',
      why: 'the chaos clock-jump fault',
      present: () => existsSync('/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1') || existsSync('/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1'),
    },
    { pkg: 'etcd-server', why: "the lock's etcd backend: its tests spawn their own etcd members", present: () => onPath('etcd') },
  ],
  // The demo spawns redis-server when nothing answers on 6379, and embeds PostgreSQL (PGlite).
  demo: [{ pkg: 'redis-server', why: 'the demo spawns one when no Redis answers', present: () => onPath('redis-server') }],
}

const missing = NEEDS[purpose].filter((n) => !n.present())
if (missing.length > 0) {
  const pkgs = missing.map((n) => n.pkg)
  if (!isRoot || !onPath('apt-get')) {
    problems.push(
      [
        `${command} needs Debian packages that are missing:`,
        ...missing.map((n) => `  ${n.pkg.padEnd(18)} ${n.why}`),
        'install them:',
        '',
        `    ${sudo}apt-get update && ${sudo}apt-get install -y --no-install-recommends ${pkgs.join(' ')}`,
      ].join('\n'),
    )
  } else {
    log(`installing ${pkgs.join(', ')} (apt-get)`)
    const apt = (args) => execFileSync('apt-get', args, { stdio: ['ignore', process.stderr, process.stderr], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } })
    apt(['update', '-qq'])
    apt(['install', '-y', '-qq', '--no-install-recommends', ...pkgs])
    const still = missing.filter((n) => !n.present())
    if (still.length > 0) problems.push(`still missing after apt-get: ${still.map((n) => n.pkg).join(', ')}`)
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
    if (await answers(host, port)) return true
    await sleep(500)
  }
  problems.push(`${what} did not come up on ${host}:${port} within 30 s`)
  return false
}

/** The URL with its password hidden, for messages. */
function redact(url) {
  const parsed = new URL(url.href)
  if (parsed.password !== '') parsed.password = '***'
  return parsed.href
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1'])

/**
 * What a PostgreSQL answers to a login as `user` on `database`, without a password (the
 * protocol's StartupMessage; no client library, nothing installed needed):
 * `{ kind: 'ok' }` when the session is ready; `{ kind: 'password', method }` when the server asks
 * for one; `{ kind: 'error', code, message }` with the server's SQLSTATE; `{ kind: 'unreachable' }`.
 */
function probePostgres(host, port, user, database, ms = 5_000) {
  const METHODS = { 3: 'a cleartext password', 5: 'an MD5 password', 10: 'a SCRAM-SHA-256 password' }
  return new Promise((resolve) => {
    const socket = connect({ host, port })
    let buffer = Buffer.alloc(0)
    let settled = false
    const done = (result) => {
      if (settled) return
      settled = true
      // Terminate ('X'), so the server logs a clean end rather than an aborted connection.
      if (result.kind === 'ok') socket.end(Buffer.from([0x58, 0, 0, 0, 4]))
      else socket.destroy()
      resolve(result)
    }
    socket.setTimeout(ms, () => done({ kind: 'unreachable', message: `no answer within ${ms} ms` }))
    socket.once('error', (error) => done({ kind: 'unreachable', message: error.message }))
    socket.once('close', () => done({ kind: 'unreachable', message: 'the server closed the connection' }))
    socket.once('connect', () => {
      const params = Buffer.from(`user\0${user}\0database\0${database}\0\0`)
      const head = Buffer.alloc(8)
      head.writeInt32BE(8 + params.length, 0)
      head.writeInt32BE(196_608, 4) // protocol 3.0
      socket.write(Buffer.concat([head, params]))
    })
    socket.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk])
      while (buffer.length >= 5) {
        const type = String.fromCharCode(buffer[0])
        const length = buffer.readInt32BE(1)
        if (buffer.length < 1 + length) return
        const body = buffer.subarray(5, 1 + length)
        buffer = buffer.subarray(1 + length)
        if (type === 'R') {
          const code = body.readInt32BE(0)
          if (code !== 0) return done({ kind: 'password', method: METHODS[code] ?? `authentication method ${code}` })
        } else if (type === 'E') {
          const fields = {}
          for (const field of body.toString('utf8').split('\0')) if (field.length > 1) fields[field[0]] = field.slice(1)
          return done({ kind: 'error', code: fields.C ?? '?', message: fields.M ?? 'an error' })
        } else if (type === 'Z') {
          return done({ kind: 'ok' })
        }
      }
    })
  })
}

/** The PostgreSQL cluster versions Debian's postgresql-common set up (`/etc/postgresql/<version>`). */
const clusterVersions = () => (existsSync('/etc/postgresql') ? readdirSync('/etc/postgresql') : [])

/**
 * Checks that the tests can log in where `url` points, without a password unless the URL has one;
 * adds what to do to `problems` when they cannot. Not checked: a URL that asks for TLS (the probe
 * speaks plain TCP) or a socket directory instead of a host.
 */
async function checkDatabaseLogin(url, origin) {
  if (url.searchParams.has('host') || /^(require|verify-ca|verify-full)$/.test(url.searchParams.get('sslmode') ?? '')) return
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1'
  const port = Number(url.port || 5432)
  const user = decodeURIComponent(url.username) || 'postgres'
  const database = decodeURIComponent(url.pathname.slice(1)) || user
  let answer = await probePostgres(host, port, user, database)
  // Just started: "the database system is starting up".
  for (let i = 0; i < 20 && answer.kind === 'error' && answer.code === '57P03'; i++) {
    await sleep(500)
    answer = await probePostgres(host, port, user, database)
  }
  if (answer.kind === 'ok' || (answer.kind === 'password' && url.password !== '')) return
  const where = `PostgreSQL at ${host}:${port}`
  const local = LOOPBACK.has(host)
  const version = clusterVersions()[0]
  const setUrl = (example) => `or point the tests at a PostgreSQL that lets them in:\n\n    export DATABASE_URL=${example}`
  if (answer.kind === 'unreachable') {
    problems.push(`${where} (${origin}) does not answer: ${answer.message}. Start it, or set DATABASE_URL to one that does.`)
  } else if (answer.kind === 'password') {
    const withPassword = new URL(url.href)
    withPassword.password = 'PASSWORD'
    const lines = [
      `${where} asks ${user} for ${answer.method}, and ${origin} (${redact(url)}) gives none. Give it one:`,
      '',
      `    export DATABASE_URL=${withPassword.href.replace(':PASSWORD@', ':<password>@')}`,
    ]
    if (local && version !== undefined) {
      const hba = `/etc/postgresql/${version}/main/pg_hba.conf`
      lines.push(
        '',
        `or, on a machine for development or CI only, let loopback connections in without one (trust), as the tests expect:`,
        '',
        `    ${sudo}sed -i '1i host all all 127.0.0.1/32 trust' ${hba}`,
        `    ${sudo}sed -i '1i host all all ::1/128 trust' ${hba}`,
        `    ${sudo}pg_ctlcluster ${version} main reload`,
      )
    }
    problems.push(lines.join('\n'))
  } else if (answer.code === '3D000') {
    problems.push(
      [
        `${where} has no database "${database}" (${origin}). Create it:`,
        '',
        local ? `    ${asPostgres}createdb ${user === 'postgres' ? '' : `-O ${user} `}${database}` : `    createdb -h ${host} -p ${port} -U <an admin role> ${user === 'postgres' ? '' : `-O ${user} `}${database}`,
        '',
        setUrl(`postgresql://${user}@${host}:${port}/<an existing database>`),
      ].join('\n'),
    )
  } else if (answer.code === '28000' && /role .* does not exist/.test(answer.message)) {
    problems.push(
      [
        `${where} has no role "${user}" (${origin}: ${answer.message}). Create it:`,
        '',
        local ? `    ${asPostgres}createuser ${user}` : `    createuser -h ${host} -p ${port} -U <an admin role> ${user}`,
        '',
        setUrl(`postgresql://<an existing role>@${host}:${port}/${database}`),
      ].join('\n'),
    )
  } else {
    const hint = answer.code === '28000' && local && version !== undefined ? ` (pg_hba.conf: /etc/postgresql/${version}/main/pg_hba.conf)` : ''
    problems.push(`${where} refuses ${user} on "${database}" (${origin}): ${answer.message} [SQLSTATE ${answer.code}]${hint}. Fix that, or set DATABASE_URL to a PostgreSQL that lets the tests in.`)
  }
}

if (purpose === 'test') {
  // Only the default addresses are started here; REDIS_URL / DATABASE_URL elsewhere are the
  // caller's to run, and are only checked.
  if (!process.env.REDIS_URL && !(await answers('127.0.0.1', 6379))) {
    const machine = 'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log'
    if (!isRoot) {
      // Nothing kept on disk, no log file: it runs as any user, from any directory.
      const user = 'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /tmp --logfile ""'
      problems.push(`Redis does not answer on 127.0.0.1:6379. Start one as yourself (or set REDIS_URL):\n\n    ${user}`)
    } else {
      log('starting Redis on 127.0.0.1:6379')
      mkdirSync('/var/lib/redis', { recursive: true })
      mkdirSync('/var/log/redis', { recursive: true })
      execFileSync('sh', ['-c', machine], { stdio: ['ignore', process.stderr, process.stderr] })
      await waitFor('127.0.0.1', 6379, 'Redis')
    }
  }

  let databaseUrl
  try {
    databaseUrl = new URL(process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/test')
  } catch {
    problems.push('DATABASE_URL is not a URL: set it to postgresql://<user>[:<password>]@<host>:<port>/<database>, or unset it.')
  }
  const origin = process.env.DATABASE_URL ? 'DATABASE_URL' : 'the default address, DATABASE_URL unset'
  let databaseUp = databaseUrl !== undefined
  if (databaseUp && !process.env.DATABASE_URL && !(await answers('127.0.0.1', 5432))) {
    const versions = clusterVersions()
    if (versions.length === 0) {
      databaseUp = false
      problems.push(
        [
          'PostgreSQL does not answer on 127.0.0.1:5432, and none is installed (no cluster in /etc/postgresql).',
          "Install Debian's postgresql package (it creates a cluster and starts it):",
          '',
          `    ${sudo}apt-get update && ${sudo}apt-get install -y postgresql`,
          '',
          'or set DATABASE_URL to a PostgreSQL elsewhere.',
        ].join('\n'),
      )
    } else {
      const start = `pg_ctlcluster --skip-systemctl-redirect ${versions[0]} main start`
      if (!isRoot) {
        databaseUp = false
        problems.push(`PostgreSQL does not answer on 127.0.0.1:5432. Start it (or set DATABASE_URL):\n\n    sudo ${start}`)
      } else {
        log('starting PostgreSQL on 127.0.0.1:5432')
        execFileSync('sh', ['-c', start], { stdio: ['ignore', process.stderr, process.stderr] })
        databaseUp = await waitFor('127.0.0.1', 5432, 'PostgreSQL')
      }
    }
  }
  if (databaseUp) await checkDatabaseLogin(databaseUrl, origin)
}

if (problems.length > 0) {
  log(`${command} cannot run on this machine yet:\n\n${problems.join('\n\n')}\n\nThen run ${command} again.\n`)
  process.exit(1)
}
