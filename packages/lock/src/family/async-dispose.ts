/**
 * `Symbol.asyncDispose`; on a runtime without it, the symbol Node 20 and the usual polyfills put
 * there (`Symbol.for('nodejs.asyncDispose')`), so `await using` compiled by TypeScript finds it.
 */
export const asyncDispose: typeof Symbol.asyncDispose =
  Symbol.asyncDispose ?? (Symbol.for('nodejs.asyncDispose') as typeof Symbol.asyncDispose)
