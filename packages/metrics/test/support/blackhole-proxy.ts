/**
 * A proxy in front of Redis that can stop forwarding without closing anything (the devkit's TCP
 * proxy): commands sent through it then get no answer, as with a stalled server or a blackholed
 * network — how the tests make Redis calls time out for real. Closed in `afterAll`.
 */
import { closeAllProxies, startTcpProxy, type TcpProxy } from '@fencelock/devkit/tcp-proxy'
import { afterAll } from 'vitest'

afterAll(closeAllProxies)

/** A proxy to `target` (default: the machine's Redis). */
export function startBlackholeProxy(target: { host: string; port: number } = { host: '127.0.0.1', port: 6379 }): Promise<TcpProxy> {
  return startTcpProxy(target)
}
