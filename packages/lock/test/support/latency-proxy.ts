/**
 * A healthy Redis that is simply far away (another zone, a busy network): the devkit's TCP proxy
 * with every chunk delayed each way. Every proxy is closed in `afterAll` of the test file.
 */
import { closeAllProxies, startTcpProxy, type TcpProxy } from '@fencelock/devkit/tcp-proxy'
import { afterAll } from 'vitest'

/** Listens on a free loopback port and forwards to `target`, `delayMs` late each way. */
export function startLatencyProxy(target: { host?: string; port: number }, delayMs: number): Promise<TcpProxy> {
  return startTcpProxy(target, { delayMs })
}

afterAll(closeAllProxies)
