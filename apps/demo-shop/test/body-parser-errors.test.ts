// Which errors the shop and the gateway answer as a bad body. The real body-parser errors (a
// compressed body that does not decompress, an unknown coding or charset, too large, not JSON)
// are sent for real in app.test.ts and gateway/gateway-app.test.ts; here, the shapes they are
// told apart by, and errors that must not be taken for them.
import { describe, expect, it } from 'vitest'
import { bodyParserFailure } from '../src/body-parser-errors.js'
import { GatewayError } from '../src/payment-gateway.js'

/** An error as http-errors leaves it after body-parser wrapped it with `status`. */
function httpError(status: number, fields: Record<string, unknown> = {}): Error {
  return Object.assign(new Error('x'), { status, statusCode: status, expose: status < 500, ...fields })
}

describe('bodyParserFailure', () => {
  it('a stream error body-parser wrapped as a bare 400 (zlib: no `type`) is an unreadable body, 400', () => {
    expect(bodyParserFailure(httpError(400, { code: 'Z_DATA_ERROR', errno: -3 }))).toMatchObject({ kind: 'unreadable', status: 400 })
  })

  it('its 415s (an unknown Content-Encoding or charset) are answered 400, naming the header', () => {
    expect(bodyParserFailure(httpError(415, { type: 'encoding.unsupported' }))).toMatchObject({ kind: 'unsupported', status: 400, header: 'Content-Encoding' })
    expect(bodyParserFailure(httpError(415, { type: 'charset.unsupported' }))).toMatchObject({ kind: 'unsupported', status: 400, header: 'Content-Type' })
  })

  it('too large stays 413; not JSON is 400', () => {
    expect(bodyParserFailure(httpError(413, { type: 'entity.too.large' }))).toMatchObject({ kind: 'too-large', status: 413 })
    expect(bodyParserFailure(httpError(400, { type: 'entity.parse.failed' }))).toMatchObject({ kind: 'malformed', status: 400 })
  })

  it('is not an application error that merely has a 4xx `status` (the gateway answered 409), nor a 5xx', () => {
    expect(bodyParserFailure(new GatewayError(409, 'stale_fencing_token', 'stale'))).toBeUndefined()
    expect(bodyParserFailure(new GatewayError(400, 'invalid_request', 'bad'))).toBeUndefined()
    expect(bodyParserFailure(httpError(500, { type: 'stream.encoding.set' }))).toBeUndefined()
    expect(bodyParserFailure(new Error('x'))).toBeUndefined()
    expect(bodyParserFailure(undefined)).toBeUndefined()
  })
})
