/**
 * scripts/ensure-system.mjs, the set-up `npm test` and `npm run demo` run first: quiet when the
 * machine has everything; for a user who is not root, one message naming everything missing (the
 * packages, a Redis or PostgreSQL that is down, a database the tests cannot log in to) and the
 * commands that fix it, exit 1, nothing on stdout; nothing at all when the command is asked for
 * its --help. Run as `nobody` when the tests run as root (CI), else as ourselves. A machine where
 * nothing answers is made with a network namespace of its own (loopback down), and one without a
 * PostgreSQL cluster with an empty /etc/postgresql mounted over it (root only: a user's namespace
 * cannot mount).
 */
import { execFileSync, spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process'
import { chmodSync, copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { createServer, Socket, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { databaseTarget } from '../src/database-url.js'
import { answersPing, freePort } from '../src/net.js'

const root = join(import.meta.dirname, '..', '..', '..')
// A PATH with node and sh only: none of the Debian packages the tests use.
const bare = mkdtempSync(join(tmpdir(), 'ensure-system-'))
chmodSync(bare, 0o755)
symlinkSync(process.execPath, join(bare, 'node'))
symlinkSync('/bin/sh', join(bare, 'sh'))
// The script runs as `nobody` below, who may not read the clone (cloned into /root, mode 700, the
// README's path on a fresh machine): a copy in a directory anyone can read. It imports only Node's
// own modules.
const script = join(bare, 'ensure-system.mjs')
copyFileSync(join(root, 'scripts', 'ensure-system.mjs'), script)
chmodSync(script, 0o644)

afterAll(() => rmSync(bare, { recursive: true, force: true }))

const asRoot = process.getuid?.() === 0
const id = (flag: string) => Number(execFileSync('id', [flag, 'nobody'], { encoding: 'utf8' }).trim())
/** Who runs the script: `nobody` when we are root, else ourselves (spawn's uid/gid). */
const user = asRoot ? { uid: id('-u'), gid: id('-g') } : {}
/** Our environment without the service addresses: the script's defaults apply. */
function envWith(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra }
  for (const name of ['REDIS_URL', 'DATABASE_URL']) if (!(name in extra)) delete env[name]
  return env
}

/** The script as a user who is not root, asynchronously (a server of this process must answer it). */
function runAsync(args: string[], env: NodeJS.ProcessEnv): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { ...user, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.once('error', reject)
    child.once('close', (status) => resolve({ status, stdout, stderr }))
  })
}

/**
 * `ensure-system.mjs test` where nothing answers on loopback, as a user who is not root; with
 * `noClusters`, /etc/postgresql is empty there too (as root; otherwise the machine's stays).
 */
function isolated(noClusters: boolean): SpawnSyncReturns<string> {
  const options = { encoding: 'utf8' as const, env: envWith(), timeout: 30_000 }
  if (!asRoot) return spawnSync('unshare', ['--net', '--map-current-user', process.execPath, script, 'test'], options)
  const drop = ['setpriv', `--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', process.execPath, script, 'test']
  const mount = noClusters ? 'mount -t tmpfs none /etc/postgresql && ' : ''
  return spawnSync('unshare', ['--net', '--mount', 'sh', '-c', `${mount}exec "$@"`, 'sh', ...drop], options)
}
const machineClusters = existsSync('/etc/postgresql') ? readdirSync('/etc/postgresql') : []

/** The PID a redis-server on `port` reports (INFO server), over a raw socket. */
function redisPid(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = new Socket()
    let text = ''
    socket.setTimeout(2_000, () => reject(new Error('no INFO answer')))
    socket.once('error', reject)
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString()
      const pid = /process_id:(\d+)/.exec(text)?.[1]
      if (pid !== undefined) {
        socket.destroy()
        resolve(Number(pid))
      }
    })
    socket.connect(port, '127.0.0.1', () => socket.write('INFO server\r\n'))
  })
}

describe('ensure-system', () => {
  it('is quiet and succeeds on this machine (everything installed, Redis and PostgreSQL up)', () => {
    const result = spawnSync(process.execPath, [script, 'test'], { encoding: 'utf8' })
    expect(result.status, result.stderr).toBe(0)
    expect(result.stdout).toBe('')
    expect(result.stderr).toBe('')
  })

  it('refuses an unknown purpose with exit 2', () => {
    expect(spawnSync(process.execPath, [script, 'bogus'], { encoding: 'utf8' }).status).toBe(2)
  })

  it('without root and without the packages: names each package and the apt-get command, exit 1, before anything runs', () => {
    const result = spawnSync(join(bare, 'node'), [script, 'test'], { encoding: 'utf8', ...user, env: { PATH: bare } })
    expect(result.status).toBe(1)
    expect(result.stdout).toBe('')
    for (const pkg of ['redis-server', 'prometheus', 'chromium', 'docker-compose', 'procps']) expect(result.stderr).toContain(pkg)
    expect(result.stderr).toMatch(/sudo apt-get update && sudo apt-get install -y --no-install-recommends redis-server prometheus chromium docker-compose procps/)
  })

  it("does nothing when the command is asked for its --help, even without the packages; `npm run demo` hands it the command's arguments", () => {
    for (const help of ['--help', '-h']) {
      const result = spawnSync(join(bare, 'node'), [script, 'demo', '--port', '3000', help], { encoding: 'utf8', ...user, env: { PATH: bare } })
      expect(result).toMatchObject({ status: 0, stdout: '', stderr: '' })
    }
    expect(spawnSync(join(bare, 'node'), [script, 'demo', '--once'], { encoding: 'utf8', ...user, env: { PATH: bare } }).status).toBe(1)
    const scripts = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts
    expect(scripts.demo).toContain('node scripts/ensure-system.mjs demo "$@"')
  })

  it('with nothing answering, without root: a Redis command that runs as that user, and sudo pg_ctlcluster', async () => {
    const result = isolated(false)
    expect(result.status, result.stderr).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).toContain('Redis does not answer on 127.0.0.1:6379')
    expect(result.stderr).not.toMatch(/\/var\/(lib|log)\/redis/)
    if (machineClusters.length > 0) expect(result.stderr).toContain(`    sudo pg_ctlcluster --skip-systemctl-redirect ${machineClusters[0]} main start`)

    // The printed command starts a Redis as that user, from a folder it cannot write to (on
    // another port: 6379 is the machine's).
    const command = /^ {4}(redis-server .*)$/m.exec(result.stderr)?.[1] ?? ''
    expect(command).toContain('--port 6379')
    const port = await freePort()
    const started = spawnSync('sh', ['-c', command.replace('--port 6379', `--port ${port}`)], { encoding: 'utf8', ...user, cwd: '/' })
    expect(started.status, started.stderr).toBe(0)
    try {
      for (let i = 0; i < 100 && !(await answersPing('127.0.0.1', port)); i++) await new Promise((r) => setTimeout(r, 50))
      expect(await answersPing('127.0.0.1', port)).toBe(true)
    } finally {
      // Daemonized: stopped by the PID it reports.
      const pid = await redisPid(port).catch(() => undefined)
      if (pid !== undefined) process.kill(pid, 'SIGKILL')
    }
  })

  it("with nothing answering and no PostgreSQL cluster: Debian's postgresql package, not a placeholder", () => {
    const result = isolated(true)
    expect(result.status, result.stderr).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).not.toContain('<version>')
    if (asRoot || machineClusters.length === 0) {
      expect(result.stderr).toContain('none is installed (no cluster in /etc/postgresql)')
      expect(result.stderr).toContain('    sudo apt-get update && sudo apt-get install -y postgresql')
    }
  })

  describe('a PostgreSQL that answers but does not let the tests in', () => {
    // The configured PostgreSQL (DATABASE_URL, else the machine's), asked for what it lacks.
    const configured = new URL(databaseTarget().connectionString)
    const at = (change: (url: URL) => void) => {
      const url = new URL(configured.href)
      change(url)
      return url.href
    }

    it('no such database: createdb as postgres, or another DATABASE_URL', async () => {
      const result = await runAsync(['test'], envWith({ DATABASE_URL: at((u) => (u.pathname = '/fencelock_no_such_db')) }))
      expect(result.status, result.stderr).toBe(1)
      expect(result.stdout).toBe('')
      expect(result.stderr).toContain('has no database "fencelock_no_such_db"')
      expect(result.stderr).toMatch(/ {4}sudo -u postgres createdb (-O \S+ )?fencelock_no_such_db\n/)
      expect(result.stderr).toContain('export DATABASE_URL=')
    })

    it('no such role: createuser as postgres', async () => {
      const result = await runAsync(['test'], envWith({ DATABASE_URL: at((u) => (u.username = 'fencelock_no_such_role')) }))
      expect(result.status, result.stderr).toBe(1)
      expect(result.stderr).toContain('has no role "fencelock_no_such_role"')
      expect(result.stderr).toContain('    sudo -u postgres createuser fencelock_no_such_role\n')
    })

    it('a password asked and none given: the URL with one, or trust in pg_hba.conf and a reload; given one, nothing to say', async () => {
      // A server that asks every login for a SCRAM-SHA-256 password, as Debian's default pg_hba.conf does.
      const server = createServer((socket) => {
        socket.on('error', () => {})
        socket.once('data', () => {
          const mechanisms = Buffer.from('SCRAM-SHA-256\0\0')
          const head = Buffer.alloc(9)
          head.write('R', 0)
          head.writeInt32BE(8 + mechanisms.length, 1)
          head.writeInt32BE(10, 5)
          socket.end(Buffer.concat([head, mechanisms]))
        })
      })
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
      const { port } = server.address() as AddressInfo
      try {
        const result = await runAsync(['test'], envWith({ DATABASE_URL: `postgresql://postgres@127.0.0.1:${port}/test` }))
        expect(result.status, result.stderr).toBe(1)
        expect(result.stdout).toBe('')
        expect(result.stderr).toContain('asks postgres for a SCRAM-SHA-256 password')
        expect(result.stderr).toContain(`    export DATABASE_URL=postgresql://postgres:<password>@127.0.0.1:${port}/test\n`)
        if (machineClusters.length > 0) {
          expect(result.stderr).toContain(`    sudo sed -i '1i host all all 127.0.0.1/32 trust' /etc/postgresql/${machineClusters[0]}/main/pg_hba.conf`)
          expect(result.stderr).toContain(`    sudo pg_ctlcluster ${machineClusters[0]} main reload`)
        }
        const withPassword = await runAsync(['test'], envWith({ DATABASE_URL: `postgresql://postgres:secret@127.0.0.1:${port}/test` }))
        expect(withPassword).toMatchObject({ status: 0, stderr: '' })
      } finally {
        await new Promise<void>((resolve) => server.close(() => resolve()))
      }
    })

    it('nothing answering at DATABASE_URL: says so', async () => {
      const result = await runAsync(['test'], envWith({ DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/test' }))
      expect(result.status).toBe(1)
      expect(result.stderr).toContain('PostgreSQL at 127.0.0.1:1 (DATABASE_URL) does not answer')
    })
  })
})
