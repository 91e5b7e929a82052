"""``python -m ingest --processes N``: workers share the ports, metrics add up, stops are clean."""

from __future__ import annotations

import http.client
import re
import signal
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from latencyboard.local.embedded import free_port, port_is_open
from latencyboard.spans.models import Span
from tests.factories import make_team_with_token
from tests.ingest.otlp import Reply, SpanSpec, export_request, post
from tests.support import PYTHON, RunningProcess, start_process, stop_process, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

STORED = re.compile(r'^latencyboard_ingest_spans_stored_total\{protocol="([^"]+)"\} (\S+)$', re.M)


def _workers(supervisor: RunningProcess, count: int) -> list[psutil.Process]:
    def children() -> list[psutil.Process]:
        found = psutil.Process(supervisor.process.pid).children()
        return found if len(found) == count else []

    return wait_until(
        children, timeout=30, message=lambda: f"expected {count} workers:\n{supervisor.log()}"
    )


@pytest.fixture
def ingest_env(request, child_env) -> dict[str, str]:
    """The workers' environment: the suite's, plus settings a test gives by parametrizing."""
    return {**child_env, **getattr(request, "param", {})}


@pytest.fixture
def two_workers(ingest_env, tmp_path) -> Iterator[tuple[RunningProcess, int, int]]:
    http_port, grpc_port = free_port(), free_port()
    running = start_process(
        [
            *(PYTHON, "-m", "ingest", "--processes", "2"),
            *("--http-port", str(http_port), "--grpc-port", str(grpc_port)),
        ],
        ingest_env,
        tmp_path / "ingest.log",
        ready_port=http_port,
    )
    _workers(running, 2)
    wait_until(lambda: port_is_open(grpc_port), timeout=30, message=running.log)
    yield running, http_port, grpc_port
    stop_process(running)


def _stored_by_protocol(http_port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10) as reply:
        return {m[1]: float(m[2]) for m in STORED.finditer(reply.read().decode())}


def test_workers_share_both_ports_and_every_span_is_stored_once(two_workers):
    # given two ingest workers behind one pair of ports
    _supervisor, http_port, grpc_port = two_workers
    tenant = make_team_with_token()
    headers = {"content-type": "application/x-protobuf", "authorization": f"Bearer {tenant.token}"}

    # when 30 HTTP requests of 4 spans arrive, each on its own connection, and an SDK
    # exporter sends 10 spans over gRPC
    for _ in range(30):
        body = export_request(*(SpanSpec() for _ in range(4))).SerializeToString()
        assert post(f"http://127.0.0.1:{http_port}/v1/traces", body, headers).status == 200
    provider = TracerProvider(resource=Resource.create({"service.name": "fraud-scorer"}))
    provider.add_span_processor(
        SimpleSpanProcessor(
            OTLPSpanExporter(
                endpoint=f"127.0.0.1:{grpc_port}",
                insecure=True,
                headers=(("authorization", f"Bearer {tenant.token}"),),
            )
        )
    )
    for i in range(10):
        with provider.get_tracer("tests").start_as_current_span(f"span-{i}"):
            pass
    provider.shutdown()

    # then every span is stored once, and each scrape of /metrics, whichever worker answers
    # it, counts all of them
    assert Span.objects.filter(team_id=tenant.team.id).count() == 130
    scrapes = [_stored_by_protocol(http_port) for _ in range(10)]
    assert all(s == {"http/protobuf": 120.0, "grpc": 10.0} for s in scrapes), scrapes


def test_sigterm_stops_every_worker_and_frees_the_ports(two_workers):
    # given two running workers
    supervisor, http_port, grpc_port = two_workers
    workers = _workers(supervisor, 2)

    # when the supervisor gets SIGTERM
    supervisor.process.send_signal(signal.SIGTERM)

    # then it exits 0, no worker is left and both ports are free
    assert supervisor.process.wait(timeout=20) == 0
    _gone, alive = psutil.wait_procs(workers, timeout=5)
    assert alive == []
    assert not port_is_open(http_port)
    assert not port_is_open(grpc_port)


def test_a_dead_worker_stops_the_whole_for_the_service_manager_to_restart(two_workers):
    # given two running workers
    supervisor, http_port, _grpc_port = two_workers
    first, second = _workers(supervisor, 2)

    # when one of them is killed outright
    first.kill()

    # then the supervisor stops the other and exits with an error
    assert supervisor.process.wait(timeout=20) != 0
    _gone, alive = psutil.wait_procs([second], timeout=5)
    assert alive == []
    assert not port_is_open(http_port)


def test_a_tokens_rate_limit_holds_across_the_workers(two_workers):
    # given two workers and a token allowed 20 spans/s (a burst of 40)
    _supervisor, http_port, _grpc_port = two_workers
    tenant = make_team_with_token(rate_limit=20)
    headers = {"content-type": "application/x-protobuf", "authorization": f"Bearer {tenant.token}"}
    url = f"http://127.0.0.1:{http_port}/v1/traces"

    def send_for(seconds: float) -> list[Reply]:
        replies, deadline = [], time.monotonic() + seconds
        while time.monotonic() < deadline:
            body = export_request(*(SpanSpec() for _ in range(5))).SerializeToString()
            replies.append(post(url, body, headers))
        return replies

    # when 4 senders post 5 spans at a time for 3 s, each request on a new connection, so that
    # the kernel spreads them over both workers
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=4) as pool:
        replies = [r for batch in pool.map(send_for, [3.0] * 4) for r in batch]
    elapsed = time.monotonic() - started

    # then together the workers accepted no more than one burst plus 20 spans/s (one batch
    # of slack for the refill of the last moment), every refusal is a 429 with a Retry-After,
    # and every accepted span is stored
    accepted = 5 * sum(r.status == 200 for r in replies)
    refused = [r for r in replies if r.status != 200]
    assert accepted <= 40 + 20 * elapsed + 5, (accepted, elapsed)
    assert {r.status for r in refused} == {429}
    assert all(int(r.headers["retry-after"]) >= 1 for r in refused)
    assert Span.objects.filter(team_id=tenant.team.id).count() == accepted


@pytest.mark.parametrize("ingest_env", [{"INGEST_HOSTS": "2"}], indirect=True)
def test_each_of_several_ingest_hosts_allows_its_share_of_a_tokens_limit(two_workers):
    # given workers of one of 2 ingest hosts and a token allowed 20 spans/s: 10 spans/s here,
    # a burst of 20
    _supervisor, http_port, _grpc_port = two_workers
    tenant = make_team_with_token(rate_limit=20)
    headers = {"content-type": "application/x-protobuf", "authorization": f"Bearer {tenant.token}"}
    body = export_request(*(SpanSpec() for _ in range(15))).SerializeToString()

    # when it sends 15 spans twice in a row
    first = post(f"http://127.0.0.1:{http_port}/v1/traces", body, headers)
    second = post(f"http://127.0.0.1:{http_port}/v1/traces", body, headers)

    # then the second passes this host's share of the burst
    assert (first.status, second.status) == (200, 429)


def _connections_per_worker(supervisor: RunningProcess, http_port: int) -> list[int]:
    return sorted(
        sum(
            1
            for found in worker.net_connections(kind="tcp")
            if found.laddr.port == http_port and found.status == psutil.CONN_ESTABLISHED
        )
        for worker in _workers(supervisor, 2)
    )


def test_keep_alive_connections_end_up_spread_evenly_over_the_workers(two_workers):
    # given two workers, whose kernel hands each new connection to one of them by a hash
    supervisor, http_port, _grpc_port = two_workers
    tenant = make_team_with_token()
    headers = {"content-type": "application/x-protobuf", "authorization": f"Bearer {tenant.token}"}
    body = export_request(SpanSpec()).SerializeToString()

    # when, three times over, an exporter opens eight keep-alive connections and sends on
    # each in turn (reconnecting when told to close, as HTTP clients do)
    spread = []
    for _ in range(3):
        connections = [http.client.HTTPConnection("127.0.0.1", http_port) for _ in range(8)]
        counts: list[int] = []
        for _round in range(40):
            for connection in connections:
                connection.request("POST", "/v1/traces", body, headers)
                assert connection.getresponse().read() == b""
            counts = _connections_per_worker(supervisor, http_port)
            if counts == [4, 4]:
                break
        spread.append(counts)
        for connection in connections:
            connection.close()

    # then each time the workers hold four each: one holding more sheds its extra
    assert spread == [[4, 4]] * 3
