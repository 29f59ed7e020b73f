import { spawnSync } from 'node:child_process'
import { EXIT_CODES } from '@fencelock/devkit/cli'
import { redisServerBin } from '@fencelock/devkit/redis-server'

/**
 * The run spawns redis-servers of its own: without the binary it cannot start. Says so on stderr as
 * `<command>: could not start: …` and exits 2 (EXIT_CODES.cannotStart), before anything is spawned.
 */
export function exitUnlessRedisServerRuns(command: string): void {
  if (spawnSync(redisServerBin(), ['--version']).status === 0) return
  console.error(`${command}: could not start: ${redisServerBin()} cannot be run: install Debian's redis-server, or set REDIS_SERVER_BIN`)
  process.exit(EXIT_CODES.cannotStart)
}
