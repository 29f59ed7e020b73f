/**
 * What `@fencelock/fencing` reports through its `onRejection` hook when the database refused a
 * write whose fencing token was older than the row's. Its type, not its code: this package never
 * loads the fencing package at run time.
 */
export type { FencingRejection } from '@fencelock/fencing'
