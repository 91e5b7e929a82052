"""What team B does to the stack in ``bench_fairness``, and what team A does meanwhile.

Each attack is a thread that keeps its pressure on until stopped: slow notification
receivers (with "Send test" clicked on each channel), Export calls that never send their
message, uploads that declare 64 MiB and send a few bytes, expensive series queries, and
exports carrying ever new ``service.name`` values, and 30-day Prometheus range queries sent
with a read-only API token as Grafana sends them. Team A's exporters (OTLP/HTTP and
OTLP/gRPC at a steady rate) and its browser record every answer with its time.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import multiprocessing as mp
import os
import queue
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from _soak_stack import ApiClient
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.latencyboard.notifications.receiver import trickling_receiver

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
LATENCY = "latencyboard_latency_seconds"
STAGES = ("queue_wait", "feature_hydration", "model_forward", "serialize")
DECLARED_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Answer:
    at: float  # time.time() when sent
    what: str  # "http" / "grpc", or the page's path
    seconds: float
    status: str


@dataclass
class Recorder:
    answers: list[Answer] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, answer: Answer) -> None:
        with self.lock:
            self.answers.append(answer)

    def between(self, t0: float, t1: float) -> list[Answer]:
        with self.lock:
            return [a for a in self.answers if t0 <= a.at < t1]


def export_body(service: str, traces: int = 4, services: int = 1) -> bytes:
    """``traces`` requests (a root and one span per stage) of each of ``services`` names."""
    request = ExportTraceServiceRequest()
    now = time.time_ns()
    for n in range(services):
        resource_spans = request.resource_spans.add()
        name = service if services == 1 else f"{service}-{n}"
        resource_spans.resource.attributes.append(
            KeyValue(key="service.name", value=AnyValue(string_value=name))
        )
        scope = resource_spans.scope_spans.add()
        for _ in range(traces):
            trace, root = os.urandom(16), os.urandom(8)
            start = now - 50_000_000
            scope.spans.append(
                Span(
                    trace_id=trace,
                    span_id=root,
                    name="predict",
                    kind=Span.SPAN_KIND_SERVER,
                    start_time_unix_nano=start,
                    end_time_unix_nano=start + 40_000_000,
                )
            )
            for i, stage in enumerate(STAGES):
                span = Span(
                    trace_id=trace,
                    span_id=os.urandom(8),
                    parent_span_id=root,
                    name=stage,
                    kind=Span.SPAN_KIND_INTERNAL,
                    start_time_unix_nano=start + i * 10_000_000,
                    end_time_unix_nano=start + (i + 1) * 10_000_000,
                )
                span.attributes.append(
                    KeyValue(key="inference.stage", value=AnyValue(string_value=stage))
                )
                scope.spans.append(span)
    return request.SerializeToString()


class Loop(threading.Thread):
    """Calls ``step`` until stopped; ``pause`` seconds between calls."""

    def __init__(self, name: str, step: Callable[[], None], pause: float) -> None:
        super().__init__(daemon=True, name=name)
        self.step, self.pause = step, pause
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            began = time.monotonic()
            with contextlib.suppress(OSError, http.client.HTTPException, grpc.RpcError):
                self.step()
            self.halt.wait(max(0.0, self.pause - (time.monotonic() - began)))

    def stop(self) -> None:
        self.halt.set()
        self.join(30)


def timed(
    what: str, port: int, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> Answer:
    """One request to the local ``port``, answered (its status) or failed (the error's name)."""
    began, at = time.perf_counter(), time.time()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body, headers)
        response = conn.getresponse()
        response.read()
        status = str(response.status)
    except (OSError, http.client.HTTPException) as exc:
        status = type(exc).__name__
    finally:
        conn.close()
    return Answer(at, what, time.perf_counter() - began, status)


def http_exporter(port: int, token: str, rate: float, recorder: Recorder) -> Loop:
    headers = {"content-type": "application/x-protobuf", "authorization": f"Bearer {token}"}

    def step() -> None:
        recorder.add(timed("http", port, "POST", "/v1/traces", export_body("checkout"), headers))

    return Loop("a-http", step, 1 / rate)


def grpc_exporter(port: int, token: str, rate: float, recorder: Recorder) -> Loop:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    export = channel.unary_unary(EXPORT)
    metadata = [("authorization", f"Bearer {token}")]

    def step() -> None:
        began, at = time.perf_counter(), time.time()
        try:
            export(export_body("checkout"), metadata=metadata, timeout=10)
            status = "OK"
        except grpc.RpcError as exc:
            status = exc.code().name
        recorder.add(Answer(at, "grpc", time.perf_counter() - began, status))

    return Loop("a-grpc", step, 1 / rate)


def browser(client: ApiClient, paths: list[str], recorder: Recorder) -> Loop:
    cycle = itertools.cycle(paths)

    def step() -> None:
        path = next(cycle)
        began, at = time.perf_counter(), time.time()
        status, _ = client.get(path)
        recorder.add(Answer(at, path, time.perf_counter() - began, str(status)))

    return Loop("a-browser", step, 0.5)


@contextlib.contextmanager
def slow_channels(send_tests: Callable[[list[str]], None], receivers: int) -> Iterator[None]:
    """Receivers answering a byte every 4 s; team B's channels to them each "Send test"-ed
    three times (``send_tests`` creates the channels and queues the tests)."""
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(trickling_receiver(4.0)) for _ in range(receivers)]
        send_tests(urls)
        yield


class SilentStreams(Loop):
    """Keeps ``count`` Export calls open that never send their message."""

    def __init__(self, port: int, token: str, count: int) -> None:
        super().__init__("b-silent-grpc", self._top_up, 0.2)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.export = self.channel.stream_unary(EXPORT)
        self.metadata = [("authorization", f"Bearer {token}")]
        self.count = count
        self.calls: list[grpc.Future] = []

    def _silent(self) -> Iterator[bytes]:
        self.halt.wait()
        yield b""

    def _top_up(self) -> None:
        self.calls = [call for call in self.calls if not call.done()]
        while len(self.calls) < self.count:
            self.calls.append(self.export.future(self._silent(), metadata=self.metadata))

    def stop(self) -> None:
        super().stop()
        for call in self.calls:
            call.cancel()
        self.channel.close()


class DeclaredHugeBodies(Loop):
    """Keeps ``count`` uploads open that declare 64 MiB and send 16 bytes."""

    def __init__(self, port: int, token: str, count: int) -> None:
        super().__init__("b-huge-bodies", self._top_up, 0.2)
        self.port, self.count = port, count
        self.head = (
            "POST /v1/traces HTTP/1.1\r\nhost: 127.0.0.1\r\n"
            f"content-type: application/x-protobuf\r\ncontent-length: {DECLARED_BYTES}\r\n"
            f"authorization: Bearer {token}\r\n\r\n"
        ).encode() + b"\x0a" * 16
        self.sockets: list[socket.socket] = []

    @staticmethod
    def _holding(sock: socket.socket) -> bool:
        """Still open and unanswered (an answer or a close ends the hold)."""
        try:
            sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return True
        except OSError:
            return False
        return False

    def _top_up(self) -> None:
        alive = []
        for sock in self.sockets:
            if self._holding(sock):
                alive.append(sock)
            else:
                sock.close()
        self.sockets = alive
        while len(self.sockets) < self.count:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            sock.sendall(self.head)
            sock.setblocking(False)
            self.sockets.append(sock)

    def stop(self) -> None:
        super().stop()
        for sock in self.sockets:
            sock.close()


def expensive_queries(
    client: ApiClient, pipeline: int, threads: int, recorder: Recorder
) -> list[Loop]:
    paths = itertools.cycle(
        [
            f"/api/pipelines/{pipeline}/stage-breakdown/?window=400d&step=1m",
            f"/api/pipelines/{pipeline}/percentiles/?window=90d&step=1m",
            "/?window=7d",
        ]
    )

    def step() -> None:
        path = next(paths)
        began, at = time.perf_counter(), time.time()
        status, _ = client.get(path)
        recorder.add(Answer(at, path, time.perf_counter() - began, str(status)))

    return [Loop(f"b-query-{n}", step, 0.0) for n in range(threads)]


THIRTY_DAYS_S = 30 * 86_400


def range_query(metric: str, seconds: float, step: str) -> str:
    """A Prometheus ``query_range`` path for the last ``seconds`` of ``metric``."""
    end = time.time()
    query = {"query": metric, "start": end - seconds, "end": end, "step": step}
    return "/prometheus/api/v1/query_range?" + urllib.parse.urlencode(query)


def token_queries(port: int, api_token: str, threads: int, recorder: Recorder) -> list[Loop]:
    """30-day ``query_range`` reads of every latency series, from ``threads`` threads at once,
    each sent with ``api_token`` alone (no session), as Grafana sends them."""
    headers = {"host": "localhost", "authorization": f"Bearer {api_token}"}

    def step() -> None:
        path = range_query(LATENCY, THIRTY_DAYS_S, "60")
        recorder.add(timed("query_range 30d (token)", port, "GET", path, None, headers))

    return [Loop(f"b-token-query-{n}", step, 0.0) for n in range(threads)]


def cardinality(port: int, token: str, services_per_export: int) -> Loop:
    """Exports whose every resource has a service.name never seen before."""
    counter = itertools.count()
    headers = {"content-type": "application/x-protobuf", "authorization": f"Bearer {token}"}

    def step() -> None:
        body = export_body(f"b-svc-{next(counter)}", traces=1, services=services_per_export)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request("POST", "/v1/traces", body, headers)
            conn.getresponse().read()
        finally:
            conn.close()

    return Loop("b-cardinality", step, 0.2)


@dataclass(frozen=True)
class Target:
    """What team B attacks with: the ingest ports, its ingest token, its logged-in viewer,
    its pipeline (for queries) and its admin's read-only API token."""

    http_port: int
    grpc_port: int
    token: str
    client: ApiClient
    pipeline: int
    api_token: str


def attack_loops(name: str, target: Target, recorder: Recorder) -> list[Loop]:
    if name == "silent_grpc":
        return [SilentStreams(target.grpc_port, target.token, 32)]
    if name == "huge_bodies":
        return [DeclaredHugeBodies(target.http_port, target.token, 8)]
    if name == "expensive_queries":
        return expensive_queries(target.client, target.pipeline, 4, recorder)
    if name == "cardinality":
        return [cardinality(target.http_port, target.token, 50)]
    if name == "token_queries":
        return token_queries(target.client.port, target.api_token, 24, recorder)
    raise ValueError(f"no attack {name!r}")


def _attack(name: str, target: Target, ready: Any, stop: Any, answers: Any) -> None:
    recorder = Recorder()
    loops = attack_loops(name, target, recorder)
    for loop in loops:
        loop.start()
    ready.set()
    stop.wait()
    # All told at once, then joined: one by one, 24 threads each finishing its request took
    # longer than the wait for their answers.
    for loop in loops:
        loop.halt.set()
    for loop in loops:
        loop.stop()
    answers.put(recorder.answers)


@contextlib.contextmanager
def attacking(name: str, target: Target, recorder: Recorder) -> Iterator[None]:
    """Team B's attack ``name`` for the ``with`` block, from a process of its own: its
    threads must not share an interpreter lock with team A's clients, whose times are read.
    The answers team B's requests got (its queries') are added to ``recorder`` after."""
    ctx = mp.get_context("spawn")
    ready, stop, answers = ctx.Event(), ctx.Event(), ctx.Queue()
    process = ctx.Process(target=_attack, args=(name, target, ready, stop, answers), daemon=True)
    process.start()
    try:
        if not ready.wait(60):
            raise TimeoutError(f"attack {name} did not start within 60 s")
        yield
    finally:
        stop.set()
        with contextlib.suppress(queue.Empty):
            for answer in answers.get(timeout=60):
                recorder.add(answer)
        process.join(30)
        if process.is_alive():
            process.kill()
