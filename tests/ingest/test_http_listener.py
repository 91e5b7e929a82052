"""The OTLP/HTTP listener's defences, over raw sockets: what is answered before or without a
body, bodies that stop arriving, and the bytes in flight per process."""

from __future__ import annotations

import functools
import socket
import time
from collections.abc import Iterator

import pytest

from latencyboard.spans.models import Span
from tests.factories import make_team_with_token
from tests.ingest.otlp import SpanSpec, export_request, metric, post
from tests.ingest.test_decoding import to_otlp_json
from tests.ingest.test_fairness import _read_by_listener
from tests.support import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PROTOBUF = "application/x-protobuf"
MIB = 1024 * 1024
REQUESTS = "latencyboard_ingest_requests_total"
# The ingest_server fixture's settings: see tests/ingest/conftest.py.
BODY_TIMEOUT_SECONDS = 2
MAX_BODY_BYTES = 4 * MIB


@pytest.fixture
def connect(ingest_server) -> Iterator[object]:
    """Open raw connections to the listener; all are closed after the test."""
    opened: list[socket.socket] = []

    def _connect() -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", ingest_server.http_port), timeout=10)
        opened.append(sock)
        return sock

    yield _connect
    for sock in opened:
        sock.close()


def _start_request(sock: socket.socket, content_length: int, token: str | None) -> None:
    """Send the request line and headers of an export, and no body yet."""
    lines = [
        "POST /v1/traces HTTP/1.1",
        "host: 127.0.0.1",
        f"content-type: {PROTOBUF}",
        f"content-length: {content_length}",
    ]
    if token is not None:
        lines.append(f"authorization: Bearer {token}")
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())


def _status(sock: socket.socket) -> int:
    """The status code of the response on ``sock`` (waits up to the socket's timeout)."""
    head = sock.recv(4096)
    return int(head.split(b" ", 2)[1])


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed the connection once it had answered."""
    try:
        while chunk := sock.recv(65536):
            del chunk
    except TimeoutError:
        return False
    return True


def test_request_without_token_is_401_before_its_body_is_sent(connect):
    # given an anonymous export announcing a 60 MiB body
    sock = connect()
    _start_request(sock, 60 * MIB, token=None)

    # when only 100 bytes of it are sent
    started = time.monotonic()
    sock.sendall(b"\x00" * 100)

    # then the 401 comes at once, without waiting for (or reading) the rest
    assert _status(sock) == 401
    assert time.monotonic() - started < BODY_TIMEOUT_SECONDS


def test_declared_body_over_the_cap_is_413_before_it_is_sent(connect):
    # given a valid token and a body announced larger than the 4 MiB cap
    tenant = make_team_with_token()
    sock = connect()

    # when only the headers are sent
    _start_request(sock, MAX_BODY_BYTES + 1, token=tenant.token)

    # then it is refused straight away
    assert _status(sock) == 413


def test_anonymous_oversized_body_is_401_not_413(ingest_server):
    # given no token and a body past the cap: the token is checked first, whatever the body
    body = export_request(SpanSpec(name="x" * (5 * MIB))).SerializeToString()

    reply = post(ingest_server.traces_url, body, {"content-type": PROTOBUF})

    assert reply.status == 401


def test_body_that_stops_arriving_is_408_and_closed(ingest_server, connect):
    # given an authenticated export that sends 3 of its 100 bytes and then nothing
    tenant = make_team_with_token()
    counted_before = metric(ingest_server.http_port, REQUESTS, code="408", protocol="http/protobuf")
    sock = connect()
    _start_request(sock, 100, token=tenant.token)
    sock.sendall(b"\x0a\x01\x00")

    # when the body read timeout passes
    started = time.monotonic()
    status = _status(sock)

    # then the server answers 408, closes the connection, counts it, and stores nothing
    assert status == 408
    assert BODY_TIMEOUT_SECONDS - 0.5 < time.monotonic() - started < BODY_TIMEOUT_SECONDS + 5
    assert _closed(sock)
    counted = metric(ingest_server.http_port, REQUESTS, code="408", protocol="http/protobuf")
    assert counted == counted_before + 1
    assert Span.objects.filter(team_id=tenant.team.id).count() == 0


def test_upload_past_the_bytes_in_flight_cap_gets_503(ingest_server, connect):
    deadline = time.monotonic() + 30
    while True:
        # given two teams' unfinished uploads holding 2.9 MiB each, nearly all of the 6 MiB
        # cap, once the listener has read (and counted) what they sent
        held = []
        for tenant in (make_team_with_token(), make_team_with_token()):
            sock = connect()
            _start_request(sock, MAX_BODY_BYTES, token=tenant.token)
            sock.sendall(b"\x00" * (29 * MIB // 10))
            held.append(sock)
        wait_until(
            functools.partial(_read_by_listener, ingest_server, *held),
            timeout=10,
            message="the listener never read the two uploads",
        )

        # when a third team sends a 1 MiB export
        third = connect()
        _start_request(third, MIB, token=make_team_with_token().token)
        third.sendall(b"\x00" * MIB)
        head = third.recv(4096)
        status = int(head.split(b" ", 2)[1])
        # (the two hold their bytes for the 2 s body timeout only, which a loaded machine may
        # spend before the third is judged: then the third is admitted, and both again)
        if status == 503 or time.monotonic() > deadline:
            break

    # then, past its 1 s wait for room, it is told to come back later rather than buffered
    assert status == 503
    assert b"\r\nretry-after: " in head.lower()


def test_bodies_in_flight_are_released_after_each_request(ingest_server):
    # given ten 1 MiB exports one after the other: more than the 6 MiB cap in total
    tenant = make_team_with_token()
    spans = [SpanSpec(attributes={"payload": "x" * 1000}) for _ in range(1000)]
    body = export_request(*spans).SerializeToString()
    assert len(body) > MIB

    # when they are sent
    statuses = [
        post(
            ingest_server.traces_url,
            body,
            {"content-type": PROTOBUF, "authorization": f"Bearer {tenant.token}"},
        ).status
        for _ in range(10)
    ]

    # then every one is accepted
    assert statuses == [200] * 10


def test_json_body_past_its_own_cap_is_413_while_protobuf_of_that_size_is_stored(ingest_server):
    # given the same 1.5 MB export as OTLP/JSON (the JSON cap is 1 MiB) and as protobuf
    tenant = make_team_with_token()
    request = export_request(*[SpanSpec(attributes={"payload": "x" * 1000}) for _ in range(1500)])
    headers = {"authorization": f"Bearer {tenant.token}"}
    json_body = to_otlp_json(request)
    assert len(json_body) > 1.5 * MIB

    # when both are posted
    as_json = post(
        ingest_server.traces_url, json_body, {**headers, "content-type": "application/json"}
    )
    as_protobuf = post(
        ingest_server.traces_url,
        request.SerializeToString(),
        {**headers, "content-type": PROTOBUF},
    )

    # then JSON is refused before it is parsed, and the protobuf export is stored
    assert (as_json.status, as_protobuf.status) == (413, 200)
    assert Span.objects.filter(team_id=tenant.team.id).count() == 1500
