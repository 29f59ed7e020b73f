/**
 * One command to a server on loopback, by `redis-cli` (raw output: every element of a reply, nested
 * ones too, on a line of its own), for fixtures that must ask servers before any client of the
 * code under test exists: a Sentinel, a cluster node, a replica.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** The reply's text, trimmed. Rejects when redis-cli fails or the server answers an error. */
export async function redisCommand(port: number, args: readonly string[], host = '127.0.0.1'): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', host, '-p', String(port), ...args], { timeout: 5_000 })
  const text = stdout.trim()
  if (/^(ERR|WRONGTYPE|NOSCRIPT|LOADING|MASTERDOWN|CLUSTERDOWN|MOVED|ASK) /.test(text)) throw new Error(`redis-cli ${args.join(' ')}: ${text}`)
  return text
}
