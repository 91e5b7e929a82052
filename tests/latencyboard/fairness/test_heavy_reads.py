"""One team's heavy reads are bounded across the web processes: beyond
WEB_TEAM_MAX_HEAVY_REQUESTS at once its further ones get 429 with Retry-After and a JSON body,
while another team's are served."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import cast

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections
from django.db.backends.signals import connection_created
from django.test import Client

from latencyboard import db
from latencyboard.alerts.models import Rule
from latencyboard.apitokens.models import Scope
from latencyboard.apitokens.services import issue_api_token
from latencyboard.fairness import heavy_reads
from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.models import Membership, Role
from tests.factories import make_team, make_user
from tests.support import wait_until

pytestmark = pytest.mark.django_db

HEAVY = (
    "/api/pipelines/{pipeline}/percentiles/?window=1h&step=1m",
    "/api/pipelines/{pipeline}/stage-breakdown/?window=1h&step=1m",
    "/api/pipelines/{pipeline}/bottleneck/?window=1h",
    "/api/traces/?pipeline={pipeline}",
    "/api/compare/?pipeline={pipeline}&attr=model.version&a=1&b=2"
    "&a_start=2026-01-01T00:00:00Z&a_end=2026-01-01T01:00:00Z"
    "&b_start=2026-01-02T00:00:00Z&b_end=2026-01-02T01:00:00Z",
    "/prometheus/api/v1/query_range?query=up&start=0&end=60&step=60",
    "/?window=7d",
)


SignIn = Callable[[User], Client]


def with_session(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def with_token(user: User) -> Client:
    """A client sending only the user's read-and-write API token, as a script does."""
    plaintext = issue_api_token(user, "script", Scope.READ_WRITE).plaintext
    return Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}")


def with_read_only_token(user: User) -> Client:
    """A client sending only the user's read-only API token, as Grafana does."""
    plaintext = issue_api_token(user, "grafana", Scope.READ).plaintext
    return Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}")


def team_member(
    sign_in: SignIn = with_session, role: Role = Role.VIEWER
) -> tuple[Client, Pipeline]:
    team = make_team()
    pipeline = Pipeline.objects.create(team=team, service_name="scorer", environment="prod")
    return sign_in(cast(User, make_user(team, role))), pipeline


@pytest.fixture
def limits(settings):
    settings.WEB_TEAM_MAX_HEAVY_REQUESTS = 2
    settings.WEB_HEAVY_WAIT_SECONDS = 0
    settings.WEB_RETRY_AFTER_SECONDS = 3


@pytest.fixture
def teams(limits):
    return team_member(), team_member()


def hold(teams: list[int], holding: threading.Event, done: threading.Event) -> None:
    """Hold a slot of ``teams`` (on a connection of this thread) until ``done``."""
    try:
        with heavy_reads.team_slots(teams):
            holding.set()
            done.wait(120)
    finally:
        connections.close_all()


@contextmanager
def held_by(client: Client, count: int) -> Iterator[None]:
    """``count`` heavy reads of the client's user in flight, as other requests of theirs
    (each a thread of its own, with its own connection) would hold them."""
    user = client.get("/api/pipelines/").wsgi_request.user  # the user the client is signed in as
    teams = list(Membership.objects.filter(user=cast(User, user)).values_list("team_id", flat=True))
    done = threading.Event()
    holders = []
    try:
        for _ in range(count):
            holding = threading.Event()
            holders.append(threading.Thread(target=hold, args=(teams, holding, done)))
            holders[-1].start()
            assert holding.wait(60)
        yield
    finally:
        done.set()
        for holder in holders:
            holder.join(60)


SIGNED_IN_READS = [
    *(pytest.param(with_session, path, id=f"session-{path}") for path in HEAVY),
    *(
        pytest.param(with_read_only_token, path, id=f"token-{path}")
        for path in HEAVY
        if not path.startswith("/?")  # a page: tokens are for the API
    ),
]


@pytest.mark.parametrize(("sign_in", "path"), SIGNED_IN_READS)
def test_a_team_beyond_its_heavy_reads_is_refused_while_another_is_served(limits, sign_in, path):
    (a, a_pipeline), (b, b_pipeline) = team_member(sign_in), team_member(sign_in)
    with held_by(b, 2):
        refused = b.get(path.format(pipeline=b_pipeline.id))
        served = a.get(path.format(pipeline=a_pipeline.id))
    assert refused.status_code == 429
    assert refused["Retry-After"] == str(settings.WEB_RETRY_AFTER_SECONDS)
    assert "2 heavy reads at once" in refused.content.decode()
    assert refused["Content-Type"].startswith("application/json")
    assert served.status_code == 200
    assert b.get(path.format(pipeline=b_pipeline.id)).status_code == 200


def test_within_the_bound_reads_are_served(teams):
    _, (b, b_pipeline) = teams
    with held_by(b, 1):
        response = b.get(f"/api/pipelines/{b_pipeline.id}/percentiles/?window=1h&step=1m")
    assert response.status_code == 200


def test_refused_and_failed_reads_give_their_slot_back(teams):
    """Answers of every kind (400, 404, 429) release what they held: after many of them the
    team still has its whole bound."""
    _, (b, b_pipeline) = teams
    for _ in range(3):
        assert b.get(f"/api/pipelines/{b_pipeline.id}/percentiles/?step=nope").status_code == 400
        assert b.get("/api/pipelines/999999999/stage-breakdown/").status_code == 404
        with held_by(b, 2):
            assert b.get("/?window=7d").status_code == 429
    with held_by(b, 1):
        assert b.get("/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_read_beyond_the_bound_waits_for_a_slot_to_free(settings):
    """With a wait, a read beyond the bound is not refused while a slot frees in time: it
    runs once the read before it ends (a page's charts fetched together all load)."""
    settings.WEB_TEAM_MAX_HEAVY_REQUESTS = 1
    settings.WEB_HEAVY_WAIT_SECONDS = 120
    user = make_user(make_team())
    entered = threading.Event()

    def second_read() -> None:
        try:
            with heavy_reads.slot(user):
                entered.set()
        finally:
            connections.close_all()

    with heavy_reads.slot(user):
        waiting = threading.Thread(target=second_read)
        waiting.start()
        assert not entered.wait(0.5)
    assert entered.wait(120)
    waiting.join(120)


HOLD_IN_ANOTHER_PROCESS = """
import sys
import django
django.setup()
from django.contrib.auth.models import User
from latencyboard.fairness import heavy_reads
with heavy_reads.slot(User.objects.get(pk=int(sys.argv[1]))):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.mark.django_db(transaction=True)
def test_the_bound_is_shared_by_the_web_processes(settings, child_env):
    """A team's heavy read running in another web process holds its slot here too: with the
    web in several processes a team gets its bound, not its bound in each process."""
    settings.WEB_TEAM_MAX_HEAVY_REQUESTS = 1
    settings.WEB_HEAVY_WAIT_SECONDS = 0
    client, pipeline = team_member()
    path = f"/api/pipelines/{pipeline.id}/percentiles/?window=1h&step=1m"
    user = client.get("/api/pipelines/").wsgi_request.user
    other = subprocess.Popen(
        [sys.executable, "-c", HOLD_IN_ANOTHER_PROCESS, str(user.pk)],
        env=child_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert other.stdout is not None
        assert other.stdout.readline() == b"held\n"
        refused = client.get(path)
    finally:
        other.communicate(timeout=120)
    assert refused.status_code == 429
    assert client.get(path).status_code == 200


@pytest.mark.parametrize("sign_in", [with_session, with_token], ids=["session", "token"])
def test_rule_previews_and_reach_are_heavy_reads(limits, sign_in):
    """Replaying a rule over 7 days and computing its reach read as much as a long series:
    beyond the team's bound they are refused, and served again once its reads end."""
    b, pipeline = team_member(sign_in, Role.ADMIN)
    rule = Rule.objects.create(pipeline=pipeline, name="tail")
    preview = ("/api/alert-rules/preview/", {"pipeline": pipeline.pk, "name": "tail"})
    reach = f"/api/alert-rules/{rule.pk}/reach/"
    with held_by(b, 2):
        refused = [b.post(*preview, content_type="application/json"), b.get(reach)]
    assert [r.status_code for r in refused] == [429, 429]
    assert all(r["Retry-After"] == str(settings.WEB_RETRY_AFTER_SECONDS) for r in refused)
    assert b.post(*preview, content_type="application/json").status_code == 200
    assert b.get(reach).status_code == 200


def test_a_rule_page_showing_its_reach_is_a_heavy_read(limits):
    b, pipeline = team_member(with_session, Role.ADMIN)
    rule = Rule.objects.create(pipeline=pipeline, name="tail")
    with held_by(b, 2):
        refused = b.get(f"/alerts/rules/{rule.pk}/")
    assert refused.status_code == 429
    assert b.get(f"/alerts/rules/{rule.pk}/").status_code == 200


def test_prometheus_refusal_has_prometheus_shape(teams):
    _, (b, _) = teams
    with held_by(b, 2):
        response = b.get("/prometheus/api/v1/query_range?query=up&start=0&end=60&step=60")
    assert response.status_code == 429
    assert response.json()["errorType"] == "unavailable"


def test_web_statements_are_cancelled_after_their_timeout():
    """``bound_statements`` (what the web process calls) makes PostgreSQL cancel a statement
    that runs past it, so one read cannot hold the database for minutes."""
    db.bound_statements(1)
    fresh = connections.create_connection(DEFAULT_DB_ALIAS)
    try:
        with fresh.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            assert cursor.fetchone() == ("1s",)
            with pytest.raises(OperationalError, match="statement timeout"):
                cursor.execute("SELECT pg_sleep(10)")
    finally:
        fresh.close()
        connection_created.disconnect(dispatch_uid="latencyboard.db.bound_statements")


THIRTY_DAYS = "/prometheus/api/v1/query_range?query=up&start=0&end=2592000&step=60"


@pytest.mark.parametrize(
    ("sign_in", "heavy_path"),
    [
        pytest.param(with_session, "/?window=7d", id="session"),
        pytest.param(with_read_only_token, THIRTY_DAYS, id="token"),
    ],
)
@pytest.mark.django_db(transaction=True)
def test_a_team_beyond_its_requests_in_flight_is_refused_at_once(settings, sign_in, heavy_path):
    """Requests waiting (here for the team's heavy-read slot, held elsewhere) count against
    WEB_TEAM_MAX_REQUESTS: the team's next request gets 429 with Retry-After at once, while
    another team is served; once they end the team is served again."""
    settings.WEB_TEAM_MAX_REQUESTS = 2
    settings.WEB_TEAM_MAX_HEAVY_REQUESTS = 1
    settings.WEB_HEAVY_WAIT_SECONDS = 120
    (a, _), (b, _) = team_member(sign_in), team_member(sign_in)
    user = cast(User, b.get("/api/pipelines/").wsgi_request.user)
    clients = [sign_in(user) for _ in range(2)]
    waiting: list[threading.Thread] = []
    answers: list[int] = []

    def read(client: Client) -> None:
        try:
            answers.append(client.get(heavy_path).status_code)
        finally:
            connections.close_all()

    with held_by(b, 1):
        for client in clients:
            waiting.append(threading.Thread(target=read, args=(client,)))
            waiting[-1].start()
        wait_for_lock_waiters(2)
        refused = b.get("/api/pipelines/")
        served = a.get("/api/pipelines/")
    for thread in waiting:
        thread.join(120)
    assert refused.status_code == 429
    assert refused["Retry-After"] == "1"
    assert "2 requests in progress" in refused.json()["detail"]
    assert served.status_code == 200
    assert answers == [200, 200]
    assert b.get("/api/pipelines/").status_code == 200


LOCK_WAITERS = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"


def wait_for_lock_waiters(count: int) -> None:
    """Until ``count`` sessions wait for an advisory lock (requests for a heavy-read slot)."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:

        def waiting() -> bool:
            cursor.execute(LOCK_WAITERS)
            return cursor.fetchone() == (count,)

        wait_until(waiting, timeout=60, message=f"{count} requests did not wait for the slot")


@pytest.mark.parametrize("sign_in", [with_session, with_read_only_token])
def test_a_range_query_it_would_refuse_is_answered_at_once_while_the_slots_are_held(
    limits, sign_in
):
    # given a team whose heavy-read slots are all held
    client, _pipeline = team_member(sign_in)
    with held_by(client, 2):
        # when it asks a range longer than any the API reads
        path = "/prometheus/api/v1/query_range?query=up&start=0&end=100000000&step=60"
        refused = client.get(path)

    # then it is told why at once, in Prometheus' shape, not told to wait for a slot
    assert refused.status_code == 400
    assert refused.json()["errorType"] == "bad_data"
    assert "may span at most" in refused.json()["error"]
