"""``python -m ingest``: the OTLP/HTTP and OTLP/gRPC listeners.

Decoding OTLP is CPU work in Python, so one process uses at most one core. With
``--processes N`` (``INGEST_PROCESSES``) this process starts N workers that share both ports
(``SO_REUSEPORT``: the kernel spreads connections over them) and only supervises them: on
SIGTERM or Ctrl-C it stops them all, and when one dies it stops the others and exits with an
error, so that the service manager restarts the whole. The workers' ``/metrics`` are summed
through prometheus_client's multiprocess mode, whichever worker a scrape reaches, and they
share one table of rate limit buckets (``ingest.ratelimit``), so a token's limit holds for the
host rather than for each worker.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import django

from ingest.balance import ConnectionCounts, create_counts
from latencyboard.processes import (
    die_with_parent,
    hand_back_the_gil_soon,
    keep_loaded_objects_out_of_the_collector,
)

logger = logging.getLogger("ingest")

WORKER_FLAG = "--worker"
RATE_TABLE_FLAG = "--rate-limit-table"
COUNTS_FLAG = "--connection-counts"
STOP_TIMEOUT = 10.0


def _listen(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    return sock


def serve(args: argparse.Namespace, *, reuse_port: bool) -> None:
    """One process serving both listeners until SIGTERM or Ctrl-C."""
    import uvicorn
    from django.conf import settings

    from ingest.grpc_server import make_server
    from ingest.http import OtlpHttpApp, counted
    from ingest.ratelimit import SpanRateLimiter
    from ingest.service import IngestService
    from ingest.writer import SpanWriter
    from latencyboard.db import conninfo
    from latencyboard.header_timeout import with_header_timeout

    # Each of an export's round trips in its transaction could otherwise wait 5 ms for the GIL
    # while another thread decodes, the database idle in transaction meanwhile.
    hand_back_the_gil_soon()
    http_socket = _listen(args.host, args.http_port, reuse_port=reuse_port)
    counts = _connection_counts(args.connection_counts)
    writer = SpanWriter(
        conninfo(),
        max_connections=args.threads,
        max_pipelines=settings.TEAM_MAX_PIPELINES,
        stage_cap=settings.PIPELINE_MAX_STAGES,
    )
    service = IngestService(
        writer,
        max_body_bytes=settings.INGEST_MAX_BODY_BYTES,
        retention_days=settings.RETENTION_DAYS,
        rate_limiter=SpanRateLimiter(table_path=args.rate_limit_table, hosts=settings.INGEST_HOSTS),
        grpc_threads=args.threads,
    )
    grpc_server = make_server(
        service, args.host, args.grpc_port, workers=args.threads, reuse_port=reuse_port
    )
    grpc_server.start()
    executor = ThreadPoolExecutor(max_workers=args.threads, thread_name_prefix="otlp-http")
    # The collector otherwise walked what is loaded every few exports: a sixth of ingest's CPU.
    keep_loaded_objects_out_of_the_collector()
    logger.info("ingest.listening", extra={"http": args.http_port, "grpc": args.grpc_port})
    server = uvicorn.Server(
        uvicorn.Config(
            OtlpHttpApp(service, executor, counts),
            http=counted(with_header_timeout(settings.INGEST_HEADER_TIMEOUT_SECONDS), counts),
            lifespan="off",
            access_log=False,
            log_level="warning",
        )
    )
    # uvicorn re-raises the signal that stopped it once it has shut down; make SIGTERM an
    # exit (and swallow Ctrl-C) so the gRPC server and the connection pool close cleanly too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        server.run(sockets=[http_socket])
    except KeyboardInterrupt:
        pass
    finally:
        grpc_server.stop(grace=5).wait()
        executor.shutdown()
        writer.close()


def _connection_counts(flag: str | None) -> ConnectionCounts:
    """This worker's counters (``PATH:INDEX`` from the supervisor), or a process alone's."""
    if flag is None:
        return ConnectionCounts()
    path, _, index = flag.rpartition(":")
    return ConnectionCounts(path, int(index))


def _stop(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        if worker.poll() is None:
            worker.terminate()
    deadline = time.monotonic() + STOP_TIMEOUT
    for worker in workers:
        try:
            worker.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def supervise(args: argparse.Namespace, argv: list[str]) -> int:
    """Start ``args.processes`` workers on the same ports; the exit status of the first to end."""
    metrics_dir = tempfile.mkdtemp(prefix="latencyboard-ingest-metrics-")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": metrics_dir}
    rate_table = _create_rate_table()
    counts = create_counts(args.processes)
    command = [sys.executable, "-m", "ingest", *argv, WORKER_FLAG]
    if rate_table is not None:
        command += [RATE_TABLE_FLAG, rate_table]
    workers: list[subprocess.Popen[bytes]] = []

    def _terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    try:
        for index in range(args.processes):
            argv_of = [*command, COUNTS_FLAG, f"{counts}:{index}"]
            workers.append(subprocess.Popen(argv_of, env=env, preexec_fn=die_with_parent))
        logger.info("ingest.workers_started", extra={"pids": [w.pid for w in workers]})
        while True:
            for worker in workers:
                code = worker.poll()
                if code is not None:
                    logger.error("ingest.worker_exited", extra={"pid": worker.pid, "code": code})
                    return code or 1
            time.sleep(0.5)
    except KeyboardInterrupt:
        return 0
    finally:
        _stop(workers)
        shutil.rmtree(metrics_dir, ignore_errors=True)
        Path(counts).unlink(missing_ok=True)
        if rate_table is not None:
            Path(rate_table).unlink(missing_ok=True)


def _create_rate_table() -> str | None:
    from ingest.ratelimit import create_table

    try:
        return create_table()
    except OSError as exc:
        logger.warning(
            "ingest.rate_limit_table_unavailable",
            extra={"error": str(exc), "fallback": "per-process"},
        )
        return None


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "latencyboard.settings")
    django.setup()
    from django.conf import settings
    from django.utils import timezone

    from latencyboard.spans.services import ensure_partitions

    parser = argparse.ArgumentParser(prog="python -m ingest", description=__doc__)
    parser.add_argument("--host", default=os.environ.get("BIND_HOST", "127.0.0.1"))
    parser.add_argument("--http-port", type=int, default=settings.INGEST_HTTP_PORT)
    parser.add_argument("--grpc-port", type=int, default=settings.INGEST_GRPC_PORT)
    parser.add_argument("--threads", type=int, default=settings.INGEST_THREADS)
    parser.add_argument(
        "--processes",
        type=int,
        default=settings.INGEST_PROCESSES,
        help="worker processes sharing the ports (one per core the ingest may use)",
    )
    parser.add_argument(WORKER_FLAG, action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(RATE_TABLE_FLAG, help=argparse.SUPPRESS)
    parser.add_argument(COUNTS_FLAG, help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    args = parser.parse_args(argv)
    if args.processes < 1:
        parser.error("--processes must be at least 1")

    if args.worker:
        serve(args, reuse_port=True)
        return 0
    # Once here rather than in every worker: they would race to create the same tables.
    ensure_partitions(timezone.now())
    if args.processes == 1:
        serve(args, reuse_port=False)
        return 0
    return supervise(args, argv)


if __name__ == "__main__":
    sys.exit(main())
