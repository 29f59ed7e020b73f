// The packages as a CommonJS program requires them (Node >= 20.19 loads their ES modules).
'use strict'
const fencing = require('@fencelock/fencing')
const lock = require('@fencelock/lock')
const metrics = require('@fencelock/metrics')
const { PrismaPg } = require('@prisma/adapter-pg')
const { PrismaClient } = require('@prisma/client')
const { Redis } = require('ioredis')
const pg = require('pg')
const promClient = require('prom-client')
const { check } = require('./check.cjs')

check({ lock, fencing, metrics, Redis, promClient, PrismaClient, PrismaPg, pg }).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
