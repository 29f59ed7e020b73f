/**
 * The wire format of the dashboard server (apps/demo-shop/src/dashboard/wire.ts), types only:
 * the server owns it, the dashboard reads it. Tokens arrive as decimal strings.
 */
export type {
  DashboardHistory,
  DashboardSnapshot,
  HeldLockView,
  InvariantsView,
  MetricsPoint,
  RunLimits,
  RunRequest,
  RunView,
  WireChaos,
  WireMode,
  ApiError,
} from '../../demo-shop/src/dashboard/wire'
