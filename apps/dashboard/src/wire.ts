/**
 * The wire format of the dashboard server (`@fencelock/demo-shop/dashboard-wire`), types only:
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
  ComparisonRequest,
  IncidentAnswer,
  IncidentStep,
  IncidentView,
  ChargedTwiceAnswer,
  ChargedTwiceOrder,
  SaleMetricsPoint,
} from '@fencelock/demo-shop/dashboard-wire'
