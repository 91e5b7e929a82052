"""``make bench-fairness``: one team attacks the product while another uses it.

On a throwaway stack (PostgreSQL, Redis, ingest, web, the fold's worker, the notifications
worker and beat, all children of this script), team A exports at a steady rate over OTLP/HTTP
and OTLP/gRPC and browses its overview, pipeline page and percentiles API, through phases of
``--phase-seconds`` each: first quiet, then one per attack of team B:

- ``slow_channels``: "Send test" on channels whose receivers answer one byte every 4 s;
- ``silent_grpc``: Export calls that never send their message, re-opened as they are cut;
- ``huge_bodies``: uploads declaring 64 MiB and sending 16 bytes, re-opened likewise;
- ``expensive_queries``: a 400-day stage breakdown at 1-minute steps and other long series,
  from several threads at once;
- ``cardinality``: exports whose every resource has a new ``service.name``.

Per phase it prints team A's p99 export latency, its failed exports (anything but 200/OK:
it has no rate limit of its own), how long its spans took to be folded (the slowest batch of
the phase, from acknowledgement to fold) and its p99 page latency, with export and page
latency as ratios to the quiet phase of the same run. Done when, in every attack: p99 export
within 2x quiet, no failed export, every batch folded within 30 s, p99 page within 2x quiet.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from _fairness_attacks import (
    Answer,
    DeclaredHugeBodies,
    Loop,
    Recorder,
    SilentStreams,
    browser,
    cardinality,
    expensive_queries,
    grpc_exporter,
    http_exporter,
    slow_channels,
)
from _soak_stack import ApiClient, Child, free_ports
from _stack import ROOT, BenchStack, bench_config, interrupt_on_sigterm, running_redis, write_json

from latencyboard.storage import tables

FIGURES = ROOT / "var" / "bench" / "fairness.json"
ATTACKS = ("slow_channels", "silent_grpc", "huge_bodies", "expensive_queries", "cardinality")
FOLD_DEADLINE_S = 30.0
TEAM_B_SCRIPT = """
from django.contrib.auth import get_user_model
from latencyboard.teams.models import Membership, Team
from latencyboard.teams.services import issue_ingest_token
team = Team.objects.create(name="team-b", slug="team-b")
admin = get_user_model().objects.create_user("b-admin")
Membership.objects.create(user=admin, team=team, role="admin")
print(team.id, issue_ingest_token(team, "attacker").plaintext)
"""
SEND_TESTS_SCRIPT = """
from django.contrib.auth import get_user_model
from django.utils import timezone
from latencyboard.alerts.models import Channel
from latencyboard.alerts.services import send_test
admin = get_user_model().objects.get(username="b-admin")
for n, url in enumerate({urls!r}):
    channel = Channel.objects.create(team=admin.memberships.get().team, name=f"slow-{{n}}",
                                     kind="webhook", target=url, secret={secret!r})
    for _ in range(3):
        send_test(channel, admin, timezone.now())
"""
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # noqa: S105 - a throwaway test key
# A constant table name, no input.
FOLDED_DELAY = f"""
SELECT count(*), count(rolled_up_at),
       coalesce(max(extract(epoch FROM coalesce(rolled_up_at, now()) - received_at)), 0)::float8
FROM {tables.INGEST_BATCH}
WHERE team_id = %s AND received_at >= to_timestamp(%s) AND received_at < to_timestamp(%s)
"""  # noqa: S608


def children(root: Path, web_port: int) -> list[Child]:
    celery = [sys.executable, "-m", "celery", "-A", "latencyboard"]
    web = [sys.executable, "-m", "uvicorn", "latencyboard.asgi:application"]
    web += ["--host", "127.0.0.1", "--port", str(web_port), "--lifespan", "off"]
    worker = [*celery, "worker", "--loglevel", "INFO", "--concurrency", "2"]
    return [
        Child("web", [*web, "--no-access-log"], root / "web.log"),
        Child("worker", [*worker, "-n", "fold@%h", "-Q", "celery,reports"], root / "worker.log"),
        Child("notifier", [*worker, "-n", "notify@%h", "-Q", "notifications"], root / "n.log"),
        Child("beat", [*celery, "beat", "--loglevel", "INFO"], root / "beat.log"),
    ]


def p99_ms(answers: list[Answer]) -> float | None:
    if not answers:
        return None
    return round(float(np.percentile([a.seconds for a in answers], 99)) * 1000, 1)


def fold_delay(url: str, team_id: int, t0: float, t1: float) -> tuple[int, int, float]:
    """(batches, folded, seconds from acknowledgement to fold of the slowest) of a phase,
    once every batch is folded or FOLD_DEADLINE_S + 30 s after the phase."""
    deadline = time.monotonic() + FOLD_DEADLINE_S + 30
    while True:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute(FOLDED_DELAY, [team_id, t0, t1]).fetchone()
        assert row is not None
        batches, folded, slowest = int(row[0]), int(row[1]), float(row[2])
        if folded == batches or time.monotonic() > deadline:
            return batches, folded, round(slowest, 1)
        time.sleep(1)


def figures_of(
    recorder: Recorder, pages: Recorder, url: str, team_id: int, t0: float, t1: float
) -> dict[str, Any]:
    exports = recorder.between(t0, t1)
    batches, folded, slowest = fold_delay(url, team_id, t0, t1)
    return {
        "exports": len(exports),
        "export_p99_ms": p99_ms(exports),
        "http_p99_ms": p99_ms([a for a in exports if a.what == "http"]),
        "grpc_p99_ms": p99_ms([a for a in exports if a.what == "grpc"]),
        "failed": sorted(a.status for a in exports if a.status not in ("200", "OK")),
        "batches": batches,
        "batches_folded": folded,
        "fold_delay_max_s": slowest,
        "pages": len(pages.between(t0, t1)),
        "page_p99_ms": p99_ms(pages.between(t0, t1)),
        "page_failed": sorted(a.status for a in pages.between(t0, t1) if a.status != "200"),
    }


def ratio(value: float | None, quiet: float | None) -> float | None:
    return round(value / quiet, 2) if value is not None and quiet else None


def run(args: argparse.Namespace) -> int:
    interrupt_on_sigterm()
    started: list[Child] = []
    loops: list[Loop] = []
    logs = ROOT / "var" / "bench" / "fairness-logs"
    with BenchStack(team_name="team-a", log_dir=logs) as stack, running_redis(stack) as redis_url:
        stack.env.update(
            {
                "REDIS_URL": redis_url,
                "NOTIFICATION_ALLOWED_NETWORKS": "127.0.0.0/8",
                "LIVE_UPDATES": "false",
            }
        )
        ingest = stack.start_ingest(threads=8)
        (web_port,) = free_ports(1)
        try:
            for child in children(stack.root, web_port):
                child.start(stack.env)
                started.append(child)
            team_b, token_b = stack.manage("shell", "-c", TEAM_B_SCRIPT)
            a_client = ApiClient(stack, web_port, "a-viewer")
            b_client = ApiClient(stack, web_port, "b-viewer", int(team_b))
            recorder, pages = Recorder(), Recorder()
            loops += [
                http_exporter(ingest.http_port, stack.token, args.rate, recorder),
                grpc_exporter(ingest.grpc_port, stack.token, args.rate, recorder),
                cardinality(ingest.http_port, token_b, 1),  # team B's one pipeline
            ]
            for loop in loops:
                loop.start()
            deadline = time.monotonic() + 60
            while not (a_client.pipeline_ids() and b_client.pipeline_ids()):
                if time.monotonic() > deadline:
                    raise TimeoutError("no pipeline of team A or B after 60 s")
                time.sleep(1)
            loops.pop().stop()
            a_pipeline, b_pipeline = a_client.pipeline_ids()[0], b_client.pipeline_ids()[0]
            a_paths = [
                "/",
                f"/pipelines/{a_pipeline}/",
                f"/api/pipelines/{a_pipeline}/percentiles/?window=1h&step=1m",
            ]
            loops.append(browser(a_client, a_paths, pages))
            loops[-1].start()
            time.sleep(args.phase_seconds / 4)  # warm-up: first folds, first page loads

            def send_tests(urls: list[str]) -> None:
                stack.manage("shell", "-c", SEND_TESTS_SCRIPT.format(urls=urls, secret=SECRET))

            attacks: dict[str, Callable[[], AbstractContextManager[Any]]] = {
                "quiet": nullcontext,
                "slow_channels": lambda: slow_channels(send_tests, 4),
                "silent_grpc": lambda: looping([SilentStreams(ingest.grpc_port, token_b, 32)]),
                "huge_bodies": lambda: looping([DeclaredHugeBodies(ingest.http_port, token_b, 8)]),
                "expensive_queries": lambda: looping(expensive_queries(b_client, b_pipeline, 4)),
                "cardinality": lambda: looping([cardinality(ingest.http_port, token_b, 50)]),
            }
            phases: dict[str, dict[str, Any]] = {}
            for name in ("quiet", *(a for a in ATTACKS if a in args.attacks)):
                with attacks[name]():
                    t0 = time.time()
                    time.sleep(args.phase_seconds)
                    t1 = time.time()
                phases[name] = figures_of(
                    recorder, pages, stack.database_url, stack.team_id, t0, t1
                )
                report(name, phases)
        finally:
            for loop in loops:
                loop.stop()
            for child in reversed(started):
                child.stop()
    return verdict(phases, args)


@contextmanager
def looping(loops: list[Loop]) -> Iterator[None]:
    """Runs attack loops for the ``with`` block."""
    for loop in loops:
        loop.start()
    try:
        yield
    finally:
        for loop in loops:
            loop.stop()


def report(name: str, phases: dict[str, dict[str, Any]]) -> None:
    quiet, phase = phases["quiet"], phases[name]
    phase["export_p99_vs_quiet"] = ratio(phase["export_p99_ms"], quiet["export_p99_ms"])
    phase["page_p99_vs_quiet"] = ratio(phase["page_p99_ms"], quiet["page_p99_ms"])
    print(
        f"  {name:<18} exports {phase['exports']:>4}  p99 {phase['export_p99_ms']} ms"
        f" ({phase['export_p99_vs_quiet']}x; http {phase['http_p99_ms']},"
        f" grpc {phase['grpc_p99_ms']})  failed {len(phase['failed'])}"
        f"  fold max {phase['fold_delay_max_s']} s"
        f" ({phase['batches_folded']}/{phase['batches']} batches)"
        f"  pages {phase['pages']} p99 {phase['page_p99_ms']} ms"
        f" ({phase['page_p99_vs_quiet']}x) failed {len(phase['page_failed'])}",
        flush=True,
    )


def verdict(phases: dict[str, dict[str, Any]], args: argparse.Namespace) -> int:
    misses = []
    for name, phase in phases.items():
        if name == "quiet":
            continue
        if (phase["export_p99_vs_quiet"] or 99) > 2:
            misses.append(f"{name}: export p99 {phase['export_p99_vs_quiet']}x quiet")
        if phase["failed"]:
            misses.append(f"{name}: {len(phase['failed'])} failed exports")
        if phase["batches_folded"] < phase["batches"]:
            misses.append(f"{name}: {phase['batches'] - phase['batches_folded']} batches unfolded")
        if phase["fold_delay_max_s"] > FOLD_DEADLINE_S:
            misses.append(f"{name}: a batch took {phase['fold_delay_max_s']} s to fold")
        if (phase["page_p99_vs_quiet"] or 99) > 2 or phase["page_failed"]:
            misses.append(f"{name}: page p99 {phase['page_p99_vs_quiet']}x quiet")
    config = bench_config(
        phase_seconds=args.phase_seconds, rate_per_protocol=args.rate, attacks=args.attacks
    )
    write_json(FIGURES, {"config": config, "phases": phases, "misses": misses})
    print("  done when holds in every attack" if not misses else "  MISSED: " + "; ".join(misses))
    return 1 if misses else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--phase-seconds", type=float, default=40)
    parser.add_argument("--rate", type=float, default=4, help="team A's exports/s per protocol")
    parser.add_argument("--attacks", nargs="*", default=list(ATTACKS), choices=ATTACKS)
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
