"""A Prometheus-compatible read API over the rollups, for Grafana's Prometheus data source."""
