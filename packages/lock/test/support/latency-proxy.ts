/**
 * The devkit's TCP proxy in front of a test server: a healthy Redis that is simply far away
 * (another zone, a busy network: every chunk delayed each way), or one cut off by a blackhole.
 * Every proxy is closed in `afterAll` of the test file.
 */
import { closeAllProxies, startTcpProxy, type TcpProxy } from '@fencelock/devkit/tcp-proxy'
import { afterAll } from 'vitest'

export { startTcpProxy, type TcpProxy } from '@fencelock/devkit/tcp-proxy'

/** Listens on a free loopback port and forwards to `target`, `delayMs` late each way. */
export function startLatencyProxy(target: { host?: string; port: number }, delayMs: number): Promise<TcpProxy> {
  return startTcpProxy(target, { delayMs })
}

afterAll(closeAllProxies)
