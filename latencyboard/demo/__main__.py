"""``python -m latencyboard.demo``: send demo inference traffic to an OTLP endpoint.

The exporter is configured by the standard OpenTelemetry environment variables:
``OTEL_EXPORTER_OTLP_ENDPOINT`` (default ``http://localhost:4318`` for http/protobuf,
``http://localhost:4317`` for grpc), ``OTEL_EXPORTER_OTLP_HEADERS`` (e.g.
``authorization=Bearer <token>``) and ``OTEL_EXPORTER_OTLP_PROTOCOL`` (``http/protobuf`` or
``grpc``). Export failures are logged by the exporter and do not stop the demo.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from latencyboard.demo.incident import IncidentFile, incident_path
from latencyboard.demo.llm import LLM_PIPELINES
from latencyboard.demo.llm_service import llm_traffic, tracer_providers
from latencyboard.demo.profiles import PIPELINES
from latencyboard.demo.service import (
    PipelineTraffic,
    Traffic,
    make_exporter,
    make_tracer_provider,
    otlp_protocol_from_env,
    run_traffic,
)

logger = logging.getLogger("latencyboard.demo")

BASE_DIR = Path(__file__).resolve().parent.parent.parent

DEFAULT_RATE = sum(p.requests_per_s for p in PIPELINES) + sum(
    p.requests_per_s for p in LLM_PIPELINES
)
# A reachable endpoint takes the final flush in milliseconds; an unreachable one would keep the
# exporters retrying for their whole export timeout (10 s by default) after Ctrl-C.
SHUTDOWN_TIMEOUT_S = 5.0


def _positive(value: str) -> float:
    number = float(value)
    if not number > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return number


def main(argv: list[str] | None = None) -> int:
    """Run the demo until SIGINT/SIGTERM or ``--duration``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m latencyboard.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--rate",
        type=_positive,
        default=DEFAULT_RATE,
        help=f"total requests per second over all pipelines (default {DEFAULT_RATE:g})",
    )
    parser.add_argument(
        "--duration", type=_positive, default=None, help="seconds to run (default: forever)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    protocol = otlp_protocol_from_env()
    try:
        providers = [
            make_tracer_provider(pipeline, BatchSpanProcessor(make_exporter(protocol)))
            for pipeline in PIPELINES
        ]
        llm_providers = [
            tracer_providers(pipeline, lambda: BatchSpanProcessor(make_exporter(protocol)))
            for pipeline in LLM_PIPELINES
        ]
    except ValueError as exc:
        parser.error(str(exc))

    stop = threading.Event()

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        logger.info("demo: %s received, stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    names = [pipeline.name for pipeline in PIPELINES]
    names += [f"{pipeline.gateway} → {pipeline.name}" for pipeline in LLM_PIPELINES]
    logger.info(
        "demo: %s pipelines at %g req/s over OTLP %s", ", ".join(names), args.rate, protocol
    )
    services: list[Traffic[Any]] = [
        PipelineTraffic(pipeline, provider.get_tracer("latencyboard.demo"))
        for pipeline, provider in zip(PIPELINES, providers, strict=True)
    ]
    services += [
        llm_traffic(pipeline, made)
        for pipeline, made in zip(LLM_PIPELINES, llm_providers, strict=True)
    ]
    # The var folder `make run` gives every process; `manage.py demo_incident` writes there.
    var_dir = os.environ.get("LATENCYBOARD_VAR_DIR", str(BASE_DIR / "var"))
    incidents = IncidentFile(incident_path(var_dir))
    sent = run_traffic(
        services, args.rate, stop, duration_s=args.duration, incident=incidents.current
    )

    everyone = [*providers, *(provider for made in llm_providers for provider in made)]
    if not _shutdown(everyone, SHUTDOWN_TIMEOUT_S):
        logger.warning(
            "demo: spans not flushed after %g s, dropping them (is the OTLP endpoint reachable?)",
            SHUTDOWN_TIMEOUT_S,
        )
    logger.info("demo: stopped after %d requests", sent)
    return 0


def _shutdown(providers: Sequence[TracerProvider], timeout_s: float) -> bool:
    """Shut the providers down (flushing their spans) side by side, waiting at most ``timeout_s``.

    Returns whether all of them finished. Daemon threads, so an unfinished flush cannot keep
    the process alive.
    """
    threads = [threading.Thread(target=provider.shutdown, daemon=True) for provider in providers]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return not any(thread.is_alive() for thread in threads)


if __name__ == "__main__":
    sys.exit(main())
