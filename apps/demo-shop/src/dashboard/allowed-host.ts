/**
 * Which `Host` a request to the dashboard may name. A page of any name can be made to resolve to
 * 127.0.0.1 (DNS rebinding); the browser then sends that name as `Host`, and the page's own
 * origin as `Origin`, so comparing the two proves nothing. The server therefore answers only the
 * names a browser uses for the address the connection came in on: loopback (`localhost`,
 * 127.0.0.0/8, `[::1]`) or that address itself (the one the server is bound to, or — bound to
 * every address — the one this connection arrived on), and only on the port it listens on. A
 * rebinding page cannot name an address: its name is what makes it a page of its own origin.
 */
import { isIP } from 'node:net'

/** Where a connection arrived: the server's side of the socket. */
export interface LocalEndpoint {
  readonly address: string | undefined
  readonly port: number | undefined
}

/** A host as the URL parser writes it (`localhost`, `127.0.0.1`, `::1`), and its port (80 when none is named). */
export function parseHost(host: string | undefined): { readonly name: string; readonly port: number } | undefined {
  // Nothing but a name or an address and a port: no user, path, query or space.
  if (host === undefined || host === '' || /[\s/?#@\\]/.test(host)) return undefined
  let url: URL
  try {
    url = new URL(`http://${host}`)
  } catch {
    return undefined
  }
  const name = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname
  return { name, port: url.port === '' ? 80 : Number(url.port) }
}

/**
 * An address in one spelling: lower case, and an IPv4 address in IPv6 (`::ffff:10.0.0.5` from a
 * dual-stack socket, `::ffff:a00:5` from the URL parser) as the IPv4 address.
 */
function canonicalAddress(address: string): string {
  const lower = address.toLowerCase()
  if (!lower.startsWith('::ffff:')) return lower
  const tail = lower.slice(7)
  const hex = /^([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(tail)
  if (hex === null) return isIP(tail) === 4 ? tail : lower
  const [hi, lo] = [parseInt(hex[1] as string, 16), parseInt(hex[2] as string, 16)]
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`
}

/** True for `localhost`, 127.0.0.0/8 and ::1. */
function loopbackName(name: string): boolean {
  const canonical = canonicalAddress(name)
  return canonical === 'localhost' || canonical === '::1' || (isIP(canonical) === 4 && canonical.startsWith('127.'))
}

/**
 * True when `host` (the request's `Host` header) names this server as a browser on this machine
 * or on the network of its bound address would: a loopback name or address, or the address the
 * connection came in on; and the port it came in on.
 */
export function hostAllowed(host: string | undefined, local: LocalEndpoint): boolean {
  const parsed = parseHost(host)
  if (parsed === undefined || local.port === undefined || parsed.port !== local.port) return false
  if (loopbackName(parsed.name)) return true
  return (
    local.address !== undefined &&
    isIP(parsed.name) !== 0 &&
    canonicalAddress(parsed.name) === canonicalAddress(local.address)
  )
}

/** The URLs a browser may open this server at, for a refusal to name: loopback, and the connection's own address when it is not. */
export function pageUrls(local: LocalEndpoint): string[] {
  const port = local.port ?? 0
  const urls = [`http://127.0.0.1:${port}/`, `http://localhost:${port}/`]
  const own = local.address === undefined ? undefined : canonicalAddress(local.address)
  if (own !== undefined && !loopbackName(own)) urls.push(`http://${own.includes(':') ? `[${own}]` : own}:${port}/`)
  return urls
}
