"""Live updates: time from an OTLP request's 200 to the points event on the pipeline's group,
and the CPU that publishing costs, at about 1,000 spans/s.

Run: ``python benchmarks/bench_live.py [--batches 50] [--spans-per-batch 200]``.

Self-contained: a throwaway PostgreSQL and Redis, a real ingest process, a Celery worker
(concurrency 2, as ``make run``) and beat. This process listens on the pipeline's channel-layer
group as a page's consumer does. Each export request's spans start in one fixed minute, so the
minute's end-to-end count in an event says which requests it includes: a request's latency is
from its 200 to the first event counting it. The same traffic is sent twice, with
``LIVE_UPDATES`` on and off (worker restarted); the difference in worker + Redis CPU is what
publishing costs. Writes ``var/bench/live.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
from _meters import CpuMeter, percentile, process_tree
from _stack import (  # puts the repo on sys.path
    PRODUCTION_SETTINGS,
    ROOT,
    BenchStack,
    bench_config,
    interrupt_on_sigterm,
    running_redis,
    write_json,
)

JSON_PATH = ROOT / "var" / "bench" / "live.json"
STAGES = ("queue_wait", "feature_hydration", "model_forward", "serialize")


def export_body(requests: int, minute_ns: int, number: int) -> bytes:
    """``requests`` traces (a root and one span per stage) starting in the minute."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    body = ExportTraceServiceRequest()
    resource = body.resource_spans.add()
    resource.resource.attributes.append(
        KeyValue(key="service.name", value=AnyValue(string_value="live-bench"))
    )
    spans = resource.scope_spans.add().spans
    for i in range(requests):
        trace = (number + 1).to_bytes(8, "big") + i.to_bytes(8, "big")
        root = (number * 100_000 + i + 1).to_bytes(8, "big")  # never 0 (invalid)
        start = minute_ns + (i % 50) * 10**9
        spans.add(
            trace_id=trace,
            span_id=root,
            name="predict",
            kind=Span.SPAN_KIND_SERVER,
            start_time_unix_nano=start,
            end_time_unix_nano=start + 40_000_000,
        )
        for n, stage in enumerate(STAGES):
            spans.add(
                trace_id=trace,
                span_id=(int.from_bytes(root, "big") + (n + 1) * 10**12).to_bytes(8, "big"),
                parent_span_id=root,
                name=stage,
                kind=Span.SPAN_KIND_INTERNAL,
                start_time_unix_nano=start,
                end_time_unix_nano=start + 8_000_000,
                attributes=[KeyValue(key="inference.stage", value=AnyValue(string_value=stage))],
            )
    return body.SerializeToString()


def post(port: int, token: str, body: bytes) -> int:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "POST",
            "/v1/traces",
            body=body,
            headers={"content-type": "application/x-protobuf", "authorization": f"Bearer {token}"},
        )
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


class Listener(threading.Thread):
    """Records (monotonic time, end-to-end count of the minute) of each points event."""

    def __init__(self, group: str, minute_iso: str) -> None:
        super().__init__(daemon=True)
        self.group, self.minute_iso = group, minute_iso
        self.events: list[tuple[float, int]] = []
        self.ready = threading.Event()

    def run(self) -> None:
        asyncio.run(self._listen())

    async def _listen(self) -> None:
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        assert layer is not None
        channel = await layer.new_channel()
        await layer.group_add(self.group, channel)
        self.ready.set()
        # No timeout on receive: a cancelled receive may drop a message.
        while True:
            message = await layer.receive(channel)
            at = time.monotonic()
            event = message["event"]
            if event["type"] == "stop":
                return
            if event["type"] != "points":
                continue
            end_to_end = event["series"][0]["points"]
            count = sum(p["n"] for p in end_to_end if p["t"] == self.minute_iso)
            self.events.append((at, count))


def redis_processes(url: str) -> list[psutil.Process]:
    """This run's redis-server (other runs on the machine have their own ports)."""
    port = url.rsplit(":", 1)[1].split("/")[0]
    # Redis rewrites its title to "redis-server 127.0.0.1:<port>".
    return [
        process
        for process in psutil.process_iter(["cmdline"])
        if (line := " ".join(process.info["cmdline"] or ())).startswith(
            (ROOT.anchor, "redis-server")
        )
        and "redis-server" in line
        and f":{port}" in line
    ]


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "celery", "-A", "latencyboard", "worker"]
    argv += ["--loglevel", "INFO", "--concurrency", "2", "--without-gossip", "--without-mingle"]
    with open(log, "ab") as out:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while b"ready." not in log.read_bytes():
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError(f"worker did not start: {log}")
        time.sleep(0.2)
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run_phase(
    stack: BenchStack, port: int, live: bool, args: argparse.Namespace, number: int
) -> dict[str, Any]:
    from latencyboard.live.groups import pipeline_group
    from latencyboard.live.services import publish
    from latencyboard.pipelines.models import Pipeline
    from latencyboard.rollups.models import Rollup

    env = {**stack.env, "LIVE_UPDATES": "true" if live else "false"}
    worker = start_worker(env, stack.root / f"worker-{number}.log")
    beat_argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "latencyboard",
        "beat",
        "--loglevel",
        "WARNING",
    ]
    beat = subprocess.Popen(
        beat_argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        minute = (time.time_ns() // 60_000_000_000 - 1) * 60_000_000_000
        minute_iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(minute // 10**9))
        minute_start = dt.datetime.fromtimestamp(minute // 10**9, dt.UTC)
        requests = args.spans_per_batch // (1 + len(STAGES))
        bodies = [export_body(requests, minute, number * 10_000 + i) for i in range(args.batches)]
        # The pipeline exists from the first request on.
        post(port, stack.token, export_body(1, minute, number * 10_000 + 9_999))
        pipeline = Pipeline.objects.get(team_id=stack.team_id, service_name="live-bench")
        listener = Listener(pipeline_group(pipeline.pk), minute_iso)
        listener.start()
        listener.ready.wait(10)
        time.sleep(6)  # the warm-up request folded and published
        # Spans of the minute already folded (the warm-up's, and the last phase's).
        base = sum(
            Rollup.objects.filter(
                pipeline=pipeline, stage=None, resolution="minute", bucket_start=minute_start
            ).values_list("count", flat=True)
        )
        meter = CpuMeter(
            {
                "worker": process_tree(worker.pid),
                "redis": lambda: redis_processes(stack.env["REDIS_URL"]),
            }
        )
        meter.start()
        interval = args.spans_per_batch / args.spans_per_second
        answered: list[tuple[float, int]] = []
        started = time.monotonic()
        for i, body in enumerate(bodies):
            time.sleep(max(0.0, started + i * interval - time.monotonic()))
            assert post(port, stack.token, body) == 200
            answered.append((time.monotonic(), base + (i + 1) * requests))
        time.sleep(6)
        cores = meter.stop()
        publish(pipeline_group(pipeline.pk), {"type": "stop"})
        listener.join(5)
        latencies, unheard = [], []
        for number, (at, expected) in enumerate(answered):
            seen = next((t for t, count in listener.events if t >= at and count >= expected), None)
            if seen is None:
                unheard.append(number)
            else:
                latencies.append(seen - at)
        return {
            "live": live,
            "requests": len(answered),
            "events": len(listener.events),
            "heard": len(latencies),
            "unheard": unheard,
            "last_count": listener.events[-1][1] if listener.events else None,
            "expected_count": answered[-1][1],
            "p50_s": round(percentile(latencies, 50), 3) if latencies else None,
            "p95_s": round(percentile(latencies, 95), 3) if latencies else None,
            "max_s": round(max(latencies), 3) if latencies else None,
            "worker_cores": round(cores["worker"], 3),
            "redis_cores": round(cores["redis"], 3),
        }
    finally:
        stop(beat)
        stop(worker)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--spans-per-batch", type=int, default=200)
    parser.add_argument("--spans-per-second", type=int, default=1000)
    args = parser.parse_args()
    interrupt_on_sigterm()
    with BenchStack(team_name="live-bench") as stack, running_redis(stack) as redis_url:
        stack.env.update({**PRODUCTION_SETTINGS, "REDIS_URL": redis_url})
        os.environ.update(stack.env)
        import django

        django.setup()
        ingest = stack.start_ingest()
        phases = [
            run_phase(stack, ingest.http_port, live, args, n)
            for n, live in enumerate((True, False))
        ]
    for phase in phases:
        print(phase)
    on, off = phases
    figures = {
        "config": bench_config(**vars(args)),
        "phases": phases,
        "publishing_cores": round(
            on["worker_cores"] + on["redis_cores"] - off["worker_cores"] - off["redis_cores"], 3
        ),
    }
    print(
        f"  commit → event p50 {on['p50_s']} s, p95 {on['p95_s']} s; publishing costs "
        f"{figures['publishing_cores']} cores"
    )
    write_json(JSON_PATH, figures)


if __name__ == "__main__":
    main()
