"""Observability: gated hot-path spans (tracing), Prometheus metrics, JSON logs, per-request records."""
