"""One team cannot stop ingest for the others, and a team alone is not held back: team B
attacks a real ingest process over raw sockets and gRPC while team A exports. Bytes in flight
are counted as they arrive; a team alone may use them all, and while another team waits for
room it keeps to its share; bodies and headers must keep arriving; silent gRPC streams are cut,
and give their slot to another team's waiting export."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from latencyboard.pipelines.models import Pipeline
from latencyboard.spans.models import Span
from tests.factories import make_team_with_token
from tests.ingest.collector_rule import export_as_the_collector, retry_delay
from tests.ingest.conftest import IngestServer, running_ingest
from tests.ingest.otlp import SpanSpec, export_request, post
from tests.support import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PROTOBUF = "application/x-protobuf"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
MIB = 1024 * 1024
# The fairness_server's settings: 6 MiB in flight, of which a team may hold half (3 MiB) while
# another waits; 4 gRPC handler slots, of which a team may hold 2 while another waits.
MAX_BODY_BYTES = 4 * MIB
MIN_RATE = 1000
THREADS = 4
MESSAGE_TIMEOUT_S = 3
MAX_PIPELINES = 3


@pytest.fixture(scope="module")
def fairness_server(
    child_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[IngestServer]:
    env = dict(
        child_env,
        INGEST_MAX_BODY_BYTES=str(MAX_BODY_BYTES),
        INGEST_MAX_INFLIGHT_BYTES=str(6 * MIB),
        INGEST_TEAM_SHARE_PERCENT="50",
        INGEST_BODY_TIMEOUT_SECONDS="30",
        INGEST_MIN_BODY_BYTES_PER_SECOND=str(MIN_RATE),
        INGEST_HEADER_TIMEOUT_SECONDS="2",
        INGEST_GRPC_MESSAGE_TIMEOUT_SECONDS=str(MESSAGE_TIMEOUT_S),
        INGEST_THREADS=str(THREADS),
        TEAM_MAX_PIPELINES=str(MAX_PIPELINES),
    )
    with running_ingest(env, tmp_path_factory.mktemp("ingest") / "ingest.log") as server:
        yield server


@pytest.fixture
def connect(fairness_server: IngestServer) -> Iterator[object]:
    opened: list[socket.socket] = []

    def _connect() -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", fairness_server.http_port), timeout=30)
        opened.append(sock)
        return sock

    yield _connect
    for sock in opened:
        sock.close()


def _start_upload(sock: socket.socket, content_length: int, token: str) -> None:
    head = (
        "POST /v1/traces HTTP/1.1\r\nhost: 127.0.0.1\r\n"
        f"content-type: {PROTOBUF}\r\ncontent-length: {content_length}\r\n"
        f"authorization: Bearer {token}\r\n\r\n"
    )
    sock.sendall(head.encode())


def _read_by_listener(server: IngestServer, *socks: socket.socket) -> bool:
    """Whether the listener has read every byte sent on ``socks``: none is left in their send
    queues nor in the listener's receive queues (Linux's table of TCP sockets)."""
    ports = {sock.getsockname()[1] for sock in socks}
    unread = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = (int(address.split(":")[1], 16) for address in fields[1:3])
        sending, receiving = (int(queue, 16) for queue in fields[4].split(":"))
        if local in ports:
            unread += sending
        elif remote in ports and local == server.http_port:
            unread += receiving
    return unread == 0


def _answer(sock: socket.socket) -> bytes:
    return sock.recv(65536)


def _status(head: bytes) -> int:
    return int(head.split(b" ", 2)[1])


def _export(server: IngestServer, token: str, spans: int = 2, payload: int = 0) -> int:
    specs = [SpanSpec(attributes={"payload": "x" * payload}) for _ in range(spans)]
    body = export_request(*specs).SerializeToString()
    headers = {"content-type": PROTOBUF, "authorization": f"Bearer {token}"}
    return post(server.traces_url, body, headers).status


def _trickle_until_answered(sock: socket.socket, data: bytes, every_s: float) -> bytes:
    """Send ``data`` ten bytes every ``every_s`` until the server answers or closes; the
    whole answer (the server closes the connection after it)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        readable, _, _ = select.select([sock], [], [], every_s)
        if readable:
            return _until_closed(sock, deadline)
        try:
            sock.sendall(data[:10])
        except (BrokenPipeError, ConnectionResetError):
            return b""
        data = data[10:]
    raise AssertionError("the server neither answered nor closed the connection")


def _until_closed(sock: socket.socket, deadline: float) -> bytes:
    answer = b""
    sock.settimeout(max(deadline - time.monotonic(), 1.0))
    while chunk := sock.recv(65536):
        answer += chunk
    return answer


def test_uploads_that_declare_huge_bodies_and_send_none_hold_nothing(fairness_server, connect):
    # given team B's two uploads declaring 4 MiB and 2 MiB (the whole 6 MiB in flight) and
    # sending 100 bytes each
    team_a, team_b = make_team_with_token("a"), make_team_with_token("b")
    uploads = [connect(), connect()]
    for sock, declared in zip(uploads, (MAX_BODY_BYTES, 2 * MIB), strict=True):
        _start_upload(sock, declared, team_b.token)
        sock.sendall(b"\x00" * 100)
    wait_until(lambda: _read_by_listener(fairness_server, *uploads), timeout=10)

    # when team A exports
    status = _export(fairness_server, team_a.token)

    # then it is stored: bytes are held as they arrive, not as declared
    assert status == 200


def test_a_team_alone_may_use_every_byte_in_flight(fairness_server, connect):
    # given team B, alone, holds 3.5 MiB in an unfinished upload (its share is 4 MiB: half the
    # 6 MiB in flight, but never less than one 4 MiB body)
    team_b = make_team_with_token("b")
    held = connect()
    _start_upload(held, MAX_BODY_BYTES, team_b.token)
    held.sendall(b"\x00" * (7 * MIB // 2))
    wait_until(lambda: _read_by_listener(fairness_server, held), timeout=10)

    # when B sends another 1 MiB export, past its share with nobody else waiting
    status = _export(fairness_server, team_b.token, spans=1000, payload=1000)

    # then it is stored: the share bounds a team only while another one waits
    assert status == 200


def test_a_team_that_finds_no_room_waits_and_the_others_keep_to_their_shares(
    fairness_server, connect
):
    # given team B, alone, holds 5.5 MiB of the 6 MiB in flight in two unfinished uploads
    team_a, team_b = make_team_with_token("a"), make_team_with_token("b")
    first, second = connect(), connect()
    _start_upload(first, MAX_BODY_BYTES, team_b.token)
    first.sendall(b"\x00" * (7 * MIB // 2))
    _start_upload(second, MAX_BODY_BYTES, team_b.token)
    second.sendall(b"\x00" * (2 * MIB))
    wait_until(lambda: _read_by_listener(fairness_server, first, second), timeout=10)

    # when team A exports 1 MiB, and B's second upload keeps sending
    status_a: list[int] = []
    exporter = threading.Thread(
        target=lambda: status_a.append(
            _export(fairness_server, team_a.token, spans=1000, payload=1000)
        )
    )
    exporter.start()
    answer = _trickle_until_answered(second, b"\x00" * MIB, every_s=0.05)
    exporter.join(30)

    # then B's growing upload is refused as its own (429: past its share while A waits), and
    # A's export, which waited for the room B gave back, is stored
    assert (_status(answer), status_a) == (429, [200])
    assert Span.objects.filter(team_id=team_a.team.id).count() == 1000


def test_a_body_trickling_below_the_minimum_rate_is_408_before_the_body_timeout(connect):
    # given an export whose 1000-byte body arrives at 20 bytes a second (the minimum is 1000)
    tenant = make_team_with_token()
    sock = connect()
    _start_upload(sock, 1000, tenant.token)

    # when it keeps trickling
    answer = _trickle_until_answered(sock, b"\x00" * 1000, every_s=0.5)

    # then it is refused for its rate, long before the 30 s body timeout would end it
    assert _status(answer) == 408
    assert f"slower than {MIN_RATE} bytes a second".encode() in answer


def test_headers_trickling_in_are_cut_at_the_header_timeout(connect):
    # given a connection that sends its request line, then a header byte every 0.5 s
    sock = connect()
    sock.sendall(b"POST /v1/traces HTTP/1.1\r\n")

    # when it keeps going
    answer = _trickle_until_answered(sock, b"x-slow: " + b"a" * 2000, every_s=0.5)

    # then the listener closes the connection without an answer (2 s header timeout)
    assert answer == b""


def test_silent_grpc_streams_of_one_team_give_way_to_another_teams_export(fairness_server):
    # given team B opens six Export calls that never send their message (4 handler slots)
    team_a, team_b = make_team_with_token("a"), make_team_with_token("b")
    release = threading.Event()

    def silent() -> Iterator[bytes]:
        release.wait(60)
        yield b""

    body = export_request(SpanSpec()).SerializeToString()
    with grpc.insecure_channel(f"127.0.0.1:{fairness_server.grpc_port}") as channel:
        export = channel.stream_unary(EXPORT)
        metadata_b = [("authorization", f"Bearer {team_b.token}")]
        calls = [export.future(silent(), metadata=metadata_b, timeout=60) for _ in range(6)]
        refused = _first_answered(calls, count=2, within_s=2.0)

        # when team A exports
        started = time.monotonic()
        reply = export.future(
            iter([body]), metadata=[("authorization", f"Bearer {team_a.token}")], timeout=10
        )

        # then A's export succeeds at once, well before B's calls reach their message deadline:
        # B, alone, held every slot, and one of its calls still waiting for its message gave
        # its slot back; B's calls past the slots were told to come back, with RetryInfo
        assert reply.result() == b""
        waited = time.monotonic() - started
        release.set()

    assert waited < MESSAGE_TIMEOUT_S / 2
    assert [call.code().name for call in refused] == ["UNAVAILABLE", "UNAVAILABLE"]
    assert all(retry_delay(call) == 2.0 for call in refused)


def _first_answered(calls: list[grpc.Future], count: int, within_s: float) -> list[grpc.Future]:
    """The calls answered once ``count`` of them are, within ``within_s``."""
    wait_until(
        lambda: sum(call.done() for call in calls) >= count,
        timeout=within_s,
        interval=0.01,
        message=f"{count} of the calls answered",
    )
    return [call for call in calls if call.done()]


def test_a_lone_teams_burst_of_grpc_exports_is_stored_by_a_client_that_retries_as_the_collector(
    fairness_server,
):
    # given team A alone, and 40 exports at once over 4 handler slots
    tenant = make_team_with_token("a")
    metadata = [("authorization", f"Bearer {tenant.token}")]
    bodies = [
        export_request(*[SpanSpec() for _ in range(5)]).SerializeToString() for _ in range(40)
    ]

    # when each is sent by a client that retries as the Collector's otlp exporter does
    with grpc.insecure_channel(f"127.0.0.1:{fairness_server.grpc_port}") as channel:
        export = channel.stream_unary(EXPORT)
        with ThreadPoolExecutor(max_workers=40) as pool:
            outcomes = list(
                pool.map(lambda body: export_as_the_collector(export, body, metadata), bodies)
            )

    # then every batch is stored once: none was refused in a way the Collector drops
    assert [outcome.dropped_with for outcome in outcomes] == [None] * 40
    assert Span.objects.filter(team_id=tenant.team.id).count() == 200


def test_spans_of_pipelines_past_the_teams_cap_are_refused_in_partial_success(fairness_server):
    # given team B already has its 3 pipelines
    team_a, team_b = make_team_with_token("a"), make_team_with_token("b")
    headers_b = {"content-type": PROTOBUF, "authorization": f"Bearer {team_b.token}"}
    for n in range(MAX_PIPELINES):
        body = export_request(SpanSpec(), service=f"svc-{n}").SerializeToString()
        assert post(fairness_server.traces_url, body, headers_b).status == 200

    # when it exports spans of a fourth service.name, and of a known one
    request = export_request(SpanSpec(), SpanSpec(), service="svc-new")
    request.resource_spans.extend(export_request(SpanSpec(), service="svc-0").resource_spans)
    reply = post(fairness_server.traces_url, request.SerializeToString(), headers_b)

    # then the new pipeline's spans are refused, saying why, and the known one's stored
    assert reply.status == 200
    partial = ExportTraceServiceResponse.FromString(reply.body).partial_success
    assert partial.rejected_spans == 2
    assert f"reached its cap of {MAX_PIPELINES} pipelines" in partial.error_message
    assert Pipeline.objects.filter(team=team_b.team).count() == MAX_PIPELINES
    assert Span.objects.filter(team_id=team_b.team.id).count() == MAX_PIPELINES + 1
    # and another team's new pipeline is created as ever
    assert _export(fairness_server, team_a.token) == 200
    assert Pipeline.objects.filter(team=team_a.team).count() == 1
