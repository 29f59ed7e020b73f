// A dedicated redis-server for one benchmark run (the devkit's): its own loopback port, nothing on
// disk, so no other test touches it and `INFO commandstats` deltas count exactly the benchmark's
// commands. Stopped by PID, and killed when the benchmark process exits. The quorum scenarios
// start N of them, kill some (SIGKILL, a crash) and start them again, empty, on the same port.
import { startRedisServer as spawnRedisServer } from '@fencelock/devkit/redis-server'

export interface BenchRedisServer {
  readonly host: string
  readonly port: number
  /** PID of the running process; throws while it is killed. */
  readonly pid: number
  readonly running: boolean
  /** SIGKILL by its PID (a crash: nothing saved), and waits until it is gone. It stays down. */
  kill(): Promise<void>
  /** Starts it again after {@link kill}, on the same port, with no data; resolves once it answers PING. */
  respawn(): Promise<void>
  /** Kills the server by its PID and removes its directory. */
  stop(): Promise<void>
}

/** Spawns `redis-server` (REDIS_SERVER_BIN, else PATH) on a free loopback port and waits until it answers PING. */
export async function startRedisServer(): Promise<BenchRedisServer> {
  const server = await spawnRedisServer()
  return {
    host: server.host,
    port: server.port,
    get pid() {
      return server.pid
    },
    get running() {
      return server.running
    },
    kill: () => server.stop(),
    respawn: () => server.spawn(),
    stop: () => server.dispose(),
  }
}
