// A dedicated redis-server for one benchmark run (the devkit's): its own loopback port, nothing on
// disk, so no other test touches it and `INFO commandstats` deltas count exactly the benchmark's
// commands. Stopped by PID, and killed when the benchmark process exits.
import { startRedisServer as spawnRedisServer } from '@fencelock/devkit/redis-server'

export interface BenchRedisServer {
  readonly host: string
  readonly port: number
  readonly pid: number
  /** Kills the server by its PID and removes its directory. */
  stop(): Promise<void>
}

/** Spawns `redis-server` (REDIS_SERVER_BIN, else PATH) on a free loopback port and waits until it answers PING. */
export async function startRedisServer(): Promise<BenchRedisServer> {
  const server = await spawnRedisServer()
  return { host: server.host, port: server.port, pid: server.pid, stop: () => server.dispose() }
}
