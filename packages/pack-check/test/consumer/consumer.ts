// A TypeScript user of the three packages, compiled with skipLibCheck: false: every declaration
// file the packages ship must resolve (no import of a package the user does not have).
import { fencing, fencingHeaders, StaleFencingTokenError, type FencingRejection } from '@fencelock/fencing'
import { Locker, type LockEvent } from '@fencelock/lock'
import { instrument, type FencingRejection as CountedRejection } from '@fencelock/metrics'
import { Redis } from 'ioredis'
import { Registry } from 'prom-client'

const locker = new Locker(new Redis())
const metrics = instrument(locker, { registry: new Registry() })
const onRejection: (r: FencingRejection) => void = metrics.onFencingRejection
const counted: CountedRejection = { model: 'Widget', operation: 'update', token: 1n, storedToken: undefined }
export const used = [fencing({ models: { Widget: 'fenceToken' }, onRejection }), fencingHeaders(1n, 'widget:1'), StaleFencingTokenError, counted, (e: LockEvent) => e.type]
