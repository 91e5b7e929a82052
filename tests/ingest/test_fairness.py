"""One team cannot stop ingest for the others: team B attacks a real ingest process over raw
sockets and gRPC while team A exports. Bytes in flight are counted as they arrive and shared
out per team; bodies and headers must keep arriving; silent gRPC streams are cut and hold at
most their team's share of the handler threads."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from latencyboard.pipelines.models import Pipeline
from latencyboard.spans.models import Span
from tests.factories import make_team_with_token
from tests.ingest.conftest import IngestServer, running_ingest
from tests.ingest.otlp import SpanSpec, export_request, post

pytestmark = pytest.mark.django_db(transaction=True)

PROTOBUF = "application/x-protobuf"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
MIB = 1024 * 1024
# The fairness_server's settings: 6 MiB in flight, of which a team may hold half (3 MiB);
# 4 gRPC handler threads, of which a team may hold 2.
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
    for declared in (MAX_BODY_BYTES, 2 * MIB):
        sock = connect()
        _start_upload(sock, declared, team_b.token)
        sock.sendall(b"\x00" * 100)
    time.sleep(0.5)  # let the listener admit them

    # when team A exports
    status = _export(fairness_server, team_a.token)

    # then it is stored: bytes are held as they arrive, not as declared
    assert status == 200


def test_a_team_past_its_share_of_bytes_in_flight_is_told_to_wait_and_others_are_not(
    fairness_server, connect
):
    # given team B holds 3.5 MiB of its 4 MiB share (half the 6 MiB in flight, but never less
    # than one 4 MiB body) in an unfinished upload
    team_a, team_b = make_team_with_token("a"), make_team_with_token("b")
    held = connect()
    _start_upload(held, MAX_BODY_BYTES, team_b.token)
    held.sendall(b"\x00" * (7 * MIB // 2))
    time.sleep(0.5)  # let the listener read it

    # when team B sends another 1 MiB export, and team A one too
    status_b = _export(fairness_server, team_b.token, spans=1000, payload=1000)
    status_a = _export(fairness_server, team_a.token, spans=1000, payload=1000)

    # then B is told to retry later (its own share: 429, not the host's 503), A is stored
    assert (status_b, status_a) == (429, 200)


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


def test_silent_grpc_streams_of_one_team_leave_room_for_the_others(fairness_server):
    # given team B opens six Export calls that never send their message (4 handler threads)
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
        time.sleep(0.5)  # let them take what they can

        # when team A exports
        reply = export.future(
            iter([body]), metadata=[("authorization", f"Bearer {team_a.token}")], timeout=10
        )

        # then A's export succeeds; B's calls beyond its share are refused at once and the
        # others cut at the message deadline
        assert reply.result() == b""
        codes = sorted(call.code().name for call in calls)
        release.set()

    assert codes.count("RESOURCE_EXHAUSTED") == 6 - THREADS // 2
    assert set(codes) <= {"RESOURCE_EXHAUSTED", "CANCELLED", "DEADLINE_EXCEEDED"}


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
