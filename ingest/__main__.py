"""``python -m ingest``: the OTLP/HTTP and OTLP/gRPC listeners in one process."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor

import django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "latencyboard.settings")
    django.setup()
    import uvicorn
    from django.conf import settings
    from django.utils import timezone

    from ingest.grpc_server import make_server
    from ingest.http import OtlpHttpApp
    from ingest.service import IngestService
    from ingest.writer import SpanWriter
    from latencyboard.db import conninfo
    from latencyboard.spans.services import ensure_partitions

    parser = argparse.ArgumentParser(prog="python -m ingest", description=__doc__)
    parser.add_argument("--host", default=os.environ.get("BIND_HOST", "127.0.0.1"))
    parser.add_argument("--http-port", type=int, default=settings.INGEST_HTTP_PORT)
    parser.add_argument("--grpc-port", type=int, default=settings.INGEST_GRPC_PORT)
    parser.add_argument("--threads", type=int, default=settings.INGEST_THREADS)
    args = parser.parse_args()

    ensure_partitions(timezone.now())
    writer = SpanWriter(conninfo(), max_connections=args.threads)
    service = IngestService(
        writer,
        max_body_bytes=settings.INGEST_MAX_BODY_BYTES,
        retention_days=settings.RETENTION_DAYS,
    )
    grpc_server = make_server(service, args.host, args.grpc_port, workers=args.threads)
    grpc_server.start()
    executor = ThreadPoolExecutor(max_workers=args.threads, thread_name_prefix="otlp-http")
    logging.getLogger(__name__).info(
        "ingest.listening", extra={"http": args.http_port, "grpc": args.grpc_port}
    )
    server = uvicorn.Server(
        uvicorn.Config(
            OtlpHttpApp(service, executor),
            host=args.host,
            port=args.http_port,
            lifespan="off",
            access_log=False,
            log_level="warning",
        )
    )
    # uvicorn re-raises the signal that stopped it once it has shut down; make SIGTERM an
    # exit (and swallow Ctrl-C) so the gRPC server and the connection pool close cleanly too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        grpc_server.stop(grace=5).wait()
        executor.shutdown()
        writer.close()


main()
