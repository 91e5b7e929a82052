"""Self-metrics of the ingest path, exposed at ``/metrics`` in Prometheus text format."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

REQUESTS = Counter(
    "latencyboard_ingest_requests_total",
    "Export requests answered, by protocol and status code.",
    ["protocol", "code"],
)
SPANS_STORED = Counter(
    "latencyboard_ingest_spans_stored_total", "Spans newly stored.", ["protocol"]
)
SPANS_DUPLICATE = Counter(
    "latencyboard_ingest_spans_duplicate_total",
    "Spans acknowledged again without storing (retried requests).",
    ["protocol"],
)
SPANS_REJECTED = Counter(
    "latencyboard_ingest_spans_rejected_total",
    "Spans rejected as invalid (reported to clients as partial success).",
    ["protocol"],
)
ATTRIBUTES_DROPPED = Counter(
    "latencyboard_ingest_attributes_dropped_total",
    "Attributes the accepted spans lack: dropped by the ingest limits "
    "(INGEST_ATTRIBUTE_COUNT_LIMIT, INGEST_SPAN_ATTRIBUTES_SIZE_LIMIT) or reported dropped by "
    "the sending SDK.",
    ["protocol"],
)
EVENTS_DROPPED = Counter(
    "latencyboard_ingest_events_dropped_total",
    "Span events the accepted spans lack: dropped by INGEST_SPAN_EVENT_COUNT_LIMIT or reported "
    "dropped by the sending SDK.",
    ["protocol"],
)
EVENT_ATTRIBUTES_DROPPED = Counter(
    "latencyboard_ingest_event_attributes_dropped_total",
    "Attributes the stored span events lack: dropped by INGEST_EVENT_ATTRIBUTE_COUNT_LIMIT or "
    "reported dropped by the sending SDK.",
    ["protocol"],
)
DB_ERRORS = Counter(
    "latencyboard_ingest_db_errors_total", "Requests answered 503 because of the database."
)
REQUEST_SECONDS = Histogram(
    "latencyboard_ingest_request_seconds",
    "Time to answer an export request.",
    ["protocol"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
BATCH_SPANS = Histogram(
    "latencyboard_ingest_batch_spans",
    "Spans per export request.",
    buckets=(1, 8, 32, 128, 512, 1024, 2048, 8192, 32768),
)
