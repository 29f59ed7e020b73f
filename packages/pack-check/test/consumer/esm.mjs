// The packages as an ES-module program imports them.
import * as fencing from '@fencelock/fencing'
import * as lock from '@fencelock/lock'
import * as metrics from '@fencelock/metrics'
import { PrismaPg } from '@prisma/adapter-pg'
import { PrismaClient } from '@prisma/client'
import { Redis } from 'ioredis'
import pg from 'pg'
import * as promClient from 'prom-client'
import { check } from './check.cjs'

await check({ lock, fencing, metrics, Redis, promClient, PrismaClient, PrismaPg, pg })
