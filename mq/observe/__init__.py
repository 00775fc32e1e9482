"""Observability: client metrics (Prometheus), OpenTelemetry spans, message trace."""
