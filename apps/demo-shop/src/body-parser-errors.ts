/**
 * What express's body parser threw, for the demo's two HTTP services (the shop and the gateway):
 * each maps it to its own error codes, so a bad body is a 4xx, never a 500.
 *
 * Every 4xx body-parser throws is the request's fault, so both services answer it as a bad request:
 * 400, but for a body over the limit (413, decompressed size included). An unsupported
 * `Content-Encoding` or charset is 400 too, not the 415 body-parser chose: the services already
 * answer 400 to a body that is not JSON at all, and a client then reads one status for "fix the
 * request" (RFC 9110 allows 415 there, it does not require it).
 */

/** A body-parser failure, and the status the services answer it with. */
export interface BodyParserFailure {
  /**
   * - `too-large`: over the limit, once decompressed (413).
   * - `malformed`: not valid JSON (400).
   * - `unsupported`: a `Content-Encoding` or a charset (of `Content-Type`) the parser does not know (400).
   * - `unreadable`: anything else, such as a compressed body that does not decompress with its
   *   `Content-Encoding`, or an upload cut short (400).
   */
  readonly kind: 'too-large' | 'malformed' | 'unsupported' | 'unreadable'
  readonly status: 400 | 413
  /** For `unsupported`: the request header at fault. */
  readonly header?: 'Content-Encoding' | 'Content-Type'
  /** What is wrong, for the client (the services add the size limit to `too-large`'s). */
  readonly message: string
}

/**
 * The body-parser failure `error` is, or `undefined`. body-parser makes every error through
 * http-errors, which marks a 4xx with `expose: true` and `status === statusCode`; its own carry a
 * string `type`, but an error of the stream under it has none: a zlib error of a body that does not
 * decompress comes wrapped as a bare 400. An application error that merely has a `status` field
 * (the shop's GatewayError) is not one.
 */
export function bodyParserFailure(error: unknown): BodyParserFailure | undefined {
  if (error === null || typeof error !== 'object') return undefined
  const { type, status, statusCode, expose } = error as { type?: unknown; status?: unknown; statusCode?: unknown; expose?: unknown }
  if (typeof status !== 'number' || status < 400 || status > 499 || statusCode !== status || expose !== true) return undefined
  if (type === 'entity.too.large') return { kind: 'too-large', status: 413, message: 'the body is too large' }
  if (type === 'entity.parse.failed') return { kind: 'malformed', status: 400, message: 'the body is not valid JSON' }
  if (type === 'encoding.unsupported') {
    return { kind: 'unsupported', status: 400, header: 'Content-Encoding', message: 'unsupported Content-Encoding: send the body as is (identity), gzip, deflate or br' }
  }
  if (type === 'charset.unsupported') return { kind: 'unsupported', status: 400, header: 'Content-Type', message: 'unsupported charset in Content-Type: send UTF-8' }
  return { kind: 'unreadable', status: 400, message: 'the body could not be read (does it decompress with its Content-Encoding?)' }
}
