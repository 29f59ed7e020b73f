// Preloaded (`NODE_OPTIONS=--import <this file>`) into the processes of a bench run when
// SHOP_WORK_COUNT_DIR is set: counts what the process sends and serves — the SQL statements its
// `pg` clients send (by first keyword), the Redis commands its ioredis clients send (by name), the
// HTTP requests its servers answer — and writes them to <dir>/<SHOP_INSTANCE_ID or pid>-<pid>.json
// at exit and every 250 ms. bench/shop.bench.ts sums them per unit sold. Counting is done in
// the client, so a statement or command is attributed to the process that sent it.
import { writeFileSync } from 'node:fs'
import { setInterval } from 'node:timers'
import http from 'node:http'
import { join } from 'node:path'
import pg from 'pg'
import { Redis } from 'ioredis'

const dir = process.env.SHOP_WORK_COUNT_DIR
if (dir) {
  const counts = { role: process.env.SHOP_INSTANCE_ID ?? 'other', pid: process.pid, sql: {}, redis: {}, http: 0 }
  const bump = (table, key) => {
    table[key] = (table[key] ?? 0) + 1
  }
  const query = pg.Client.prototype.query
  pg.Client.prototype.query = function (config, ...rest) {
    const text = typeof config === 'string' ? config : config?.text
    if (typeof text === 'string') bump(counts.sql, (/^\s*(\w+)/.exec(text)?.[1] ?? '?').toUpperCase())
    return query.call(this, config, ...rest)
  }
  const sendCommand = Redis.prototype.sendCommand
  Redis.prototype.sendCommand = function (command, ...rest) {
    if (command?.name) bump(counts.redis, String(command.name).toUpperCase())
    return sendCommand.call(this, command, ...rest)
  }
  const emit = http.Server.prototype.emit
  http.Server.prototype.emit = function (event, ...rest) {
    if (event === 'request') counts.http++
    return emit.call(this, event, ...rest)
  }
  const file = join(dir, `${counts.role}-${process.pid}.json`)
  const write = () => {
    try {
      writeFileSync(file, JSON.stringify(counts))
    } catch {
      // The bench reads what was written last.
    }
  }
  setInterval(write, 250).unref()
  process.on('exit', write)
}
