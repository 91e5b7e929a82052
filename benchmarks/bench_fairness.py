"""``make bench-fairness``: one team attacks the product while another uses it.

On a throwaway stack (PostgreSQL, Redis, ingest, web, the fold's worker, the notifications
worker and beat, all children of this script), team A exports at a steady rate over OTLP/HTTP
and OTLP/gRPC and browses its overview, pipeline page and percentiles API, while team B runs
each attack in turn. The machine's load changes under a run (the box is shared), so each
attack is measured in ``--rounds`` pairs of slices of ``--slice-seconds``: quiet, then under
attack, and compared with its own quiet slices. The attacks run in a process of their own:

- ``slow_channels``: "Send test" on channels whose receivers answer one byte every 4 s;
- ``silent_grpc``: Export calls that never send their message, re-opened as they are cut;
- ``huge_bodies``: uploads declaring 64 MiB and sending 16 bytes, re-opened likewise;
- ``expensive_queries``: a 400-day stage breakdown at 1-minute steps and other long series,
  from several threads at once;
- ``cardinality``: exports whose every resource has a new ``service.name``;
- ``token_queries``: 30-day Prometheus ``query_range`` reads from 24 threads at once, sent
  with team B's read-only API token (the Grafana setup of docs/grafana-and-api.md) instead of
  a session.

Per attack it prints team A's p99 export latency quiet and under attack, its failed exports
under attack (anything but 200/OK: it has no rate limit of its own), how long its spans took
to be folded (the slowest batch, acknowledgement to fold) and its p99 page latency quiet and
under attack, latencies also as ratios; then team A's p99 per page, the cores the web and
PostgreSQL used quiet and under attack, and the answers team B's queries got. The web is
served as ``make run`` serves it. Done when, in every attack: p99 export within 2x quiet, no
failed export, every batch folded within 30 s, p99 page within 2x quiet.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import psycopg
from _fairness_attacks import (
    LATENCY,
    Answer,
    Loop,
    Recorder,
    Target,
    attacking,
    browser,
    cardinality,
    grpc_exporter,
    http_exporter,
    range_query,
    slow_channels,
)
from _soak_stack import ApiClient, Child, free_ports
from _stack import ROOT, BenchStack, bench_config, interrupt_on_sigterm, running_redis, write_json

from latencyboard.local.runner import serve_without_debug, web_command
from latencyboard.storage import tables

FIGURES = ROOT / "var" / "bench" / "fairness.json"
ATTACKS = (
    "slow_channels",
    "silent_grpc",
    "huge_bodies",
    "expensive_queries",
    "cardinality",
    "token_queries",
)
FOLD_DEADLINE_S = 30.0
TEAM_B_SCRIPT = """
from django.contrib.auth import get_user_model
from latencyboard.apitokens.services import issue_api_token
from latencyboard.teams.models import Membership, Team
from latencyboard.teams.services import issue_ingest_token
team = Team.objects.create(name="team-b", slug="team-b")
admin = get_user_model().objects.create_user("b-admin")
Membership.objects.create(user=admin, team=team, role="admin")
grafana = issue_api_token(admin, "grafana", "read").plaintext
print(team.id, issue_ingest_token(team, "attacker").plaintext, grafana)
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


def children(root: Path, env: dict[str, str]) -> list[Child]:
    celery = [sys.executable, "-m", "celery", "-A", "latencyboard"]
    web = web_command(env, "127.0.0.1")  # as make run serves it
    worker = [*celery, "worker", "--loglevel", "INFO"]
    slots = env.get("NOTIFICATION_SLOTS", "2")  # the outbox's delivery slots, as make run
    return [
        Child("web", [*web, "--no-access-log"], root / "web.log"),
        Child(
            "worker",
            [*worker, "--concurrency", "2", "-n", "fold@%h", "-Q", "celery,reports"],
            root / "worker.log",
        ),
        Child(
            "notifier",
            [*worker, "--concurrency", slots, "-n", "notify@%h", "-Q", "notifications"],
            root / "n.log",
        ),
        Child("beat", [*celery, "beat", "--loglevel", "INFO"], root / "beat.log"),
    ]


Window = tuple[float, float]


def p99_ms(answers: list[Answer]) -> float | None:
    if not answers:
        return None
    return round(float(np.percentile([a.seconds for a in answers], 99)) * 1000, 1)


def during(recorder: Recorder, windows: list[Window]) -> list[Answer]:
    return [answer for t0, t1 in windows for answer in recorder.between(t0, t1)]


def fold_delay(url: str, team_id: int, windows: list[Window]) -> tuple[int, int, float]:
    """(batches, folded, seconds from acknowledgement to fold of the slowest) of the windows,
    once every batch is folded or FOLD_DEADLINE_S + 30 s after the last window."""
    deadline = time.monotonic() + FOLD_DEADLINE_S + 30
    while True:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            rows = [conn.execute(FOLDED_DELAY, [team_id, *w]).fetchone() for w in windows]
        batches = sum(int(row[0]) for row in rows if row)
        folded = sum(int(row[1]) for row in rows if row)
        slowest = max(float(row[2]) for row in rows if row)
        if folded == batches or time.monotonic() > deadline:
            return batches, folded, round(slowest, 1)
        time.sleep(1)


def answer_counts(answers: list[Answer]) -> dict[str, dict[str, Any]]:
    """Per path and status: how many answers, and their p99 in ms."""
    kinds: dict[str, list[Answer]] = {}
    for answer in answers:
        kinds.setdefault(f"{answer.what} {answer.status}", []).append(answer)
    return {kind: {"n": len(of), "p99_ms": p99_ms(of)} for kind, of in sorted(kinds.items())}


def p99_by_path(answers: list[Answer]) -> dict[str, float | None]:
    paths = sorted({a.what for a in answers})
    return {path: p99_ms([a for a in answers if a.what == path]) for path in paths}


def ratio(value: float | None, quiet: float | None) -> float | None:
    return round(value / quiet, 2) if value is not None and quiet else None


def figures_of(
    exports: Recorder, pages: Recorder, quiet: list[Window], attacked: list[Window]
) -> dict[str, Any]:
    under = during(exports, attacked)
    figures: dict[str, Any] = {
        "exports": len(under),
        "export_p99_quiet_ms": p99_ms(during(exports, quiet)),
        "export_p99_ms": p99_ms(under),
        "http_p99_ms": p99_ms([a for a in under if a.what == "http"]),
        "grpc_p99_ms": p99_ms([a for a in under if a.what == "grpc"]),
        "failed": sorted(a.status for a in under if a.status not in ("200", "OK")),
        "pages": len(during(pages, attacked)),
        "page_p99_quiet_ms": p99_ms(during(pages, quiet)),
        "page_p99_ms": p99_ms(during(pages, attacked)),
        "page_failed": sorted(a.status for a in during(pages, attacked) if a.status != "200"),
        "page_p99_by_path_quiet_ms": p99_by_path(during(pages, quiet)),
        "page_p99_by_path_ms": p99_by_path(during(pages, attacked)),
    }
    figures["export_p99_vs_quiet"] = ratio(figures["export_p99_ms"], figures["export_p99_quiet_ms"])
    figures["page_p99_vs_quiet"] = ratio(figures["page_p99_ms"], figures["page_p99_quiet_ms"])
    return figures


def cpu_seconds(root: psutil.Process) -> float:
    """CPU time (user and system) used so far by ``root`` and its descendants, live or
    ended (PostgreSQL's backends end with their connections, and the postmaster reaps them)."""
    total = 0.0
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


class CpuMeter:
    """Cores used by the web process and by PostgreSQL over the windows waited."""

    def __init__(self, web: psutil.Process, postgres: psutil.Process) -> None:
        self.roots = {"web": web, "postgres": postgres}
        self.used: dict[str, float] = dict.fromkeys(self.roots, 0.0)
        self.seconds = 0.0

    def wait_noting(self, seconds: float, windows: list[Window]) -> None:
        """Wait ``seconds``, note the window waited and the CPU used in it."""
        t0, before = time.time(), {name: cpu_seconds(p) for name, p in self.roots.items()}
        time.sleep(seconds)
        for name, root in self.roots.items():
            self.used[name] += cpu_seconds(root) - before[name]
        self.seconds += time.time() - t0
        windows.append((t0, time.time()))

    def cores(self) -> dict[str, float]:
        return {name: round(used / self.seconds, 2) for name, used in self.used.items()}


def run(args: argparse.Namespace) -> int:
    interrupt_on_sigterm()
    started: list[Child] = []
    loops: list[Loop] = []
    attacks: dict[str, dict[str, Any]] = {}
    logs = ROOT / "var" / "bench" / "fairness-logs"
    with BenchStack(team_name="team-a", log_dir=logs) as stack, running_redis(stack) as redis_url:
        stack.env.update(
            {
                "REDIS_URL": redis_url,
                "NOTIFICATION_ALLOWED_NETWORKS": "127.0.0.0/8",
                "LIVE_UPDATES": "false",
            }
        )
        (stack.root / "var").mkdir(exist_ok=True)  # beat's schedule file
        # As make run serves it: DEBUG off (no query log), static files collected.
        serve_without_debug(stack.env, stack.root / "var")
        stack.env["STATIC_ROOT"] = str(stack.root / "static")
        stack.manage("collectstatic", "--no-input")
        ingest = stack.start_ingest(threads=8)
        (web_port,) = free_ports(1)
        try:
            stack.env["WEB_PORT"] = str(web_port)
            for child in children(stack.root, stack.env):
                child.start(stack.env)
                started.append(child)
            web = psutil.Process(started[0].process.pid)
            postgres = psutil.Process(stack.postgres.process.pid)
            team_b, token_b, api_token_b = stack.manage("shell", "-c", TEAM_B_SCRIPT)
            a_client = ApiClient(stack, web_port, "a-viewer")
            b_client = ApiClient(stack, web_port, "b-viewer", int(team_b))
            exports, pages = Recorder(), Recorder()
            loops += [
                http_exporter(ingest.http_port, stack.token, args.rate, exports),
                grpc_exporter(ingest.grpc_port, stack.token, args.rate, exports),
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
            a_pipeline = a_client.pipeline_ids()[0]
            b_pipeline = b_client.pipeline_ids()[0]
            target = Target(
                ingest.http_port, ingest.grpc_port, token_b, b_client, b_pipeline, api_token_b
            )
            a_paths = [
                "/",
                f"/pipelines/{a_pipeline}/",
                f"/api/pipelines/{a_pipeline}/percentiles/?window=1h&step=1m",
                range_query(LATENCY, 3600, "60"),
            ]
            loops.append(browser(a_client, a_paths, pages))
            loops[-1].start()
            time.sleep(args.slice_seconds)  # warm-up: first folds, first page loads

            def send_tests(urls: list[str]) -> None:
                stack.manage("shell", "-c", SEND_TESTS_SCRIPT.format(urls=urls, secret=SECRET))

            for name in args.attacks:
                team_b_answers = Recorder()
                quiet: list[Window] = []
                attacked: list[Window] = []
                quiet_cpu, attack_cpu = CpuMeter(web, postgres), CpuMeter(web, postgres)
                for _ in range(args.rounds):
                    quiet_cpu.wait_noting(args.slice_seconds, quiet)
                    attack = (
                        slow_channels(send_tests, 4)
                        if name == "slow_channels"
                        else attacking(name, target, team_b_answers)
                    )
                    with attack:
                        attack_cpu.wait_noting(args.slice_seconds, attacked)
                figures = figures_of(exports, pages, quiet, attacked)
                figures.update(
                    team_b_answers=answer_counts(team_b_answers.answers),
                    cores_quiet=quiet_cpu.cores(),
                    cores_attacked=attack_cpu.cores(),
                )
                batches, folded, slowest = fold_delay(stack.database_url, stack.team_id, attacked)
                figures.update(batches=batches, batches_folded=folded, fold_delay_max_s=slowest)
                attacks[name] = figures
                report(name, figures)
        finally:
            for loop in loops:
                loop.stop()
            for child in reversed(started):
                child.stop()
    return verdict(attacks, args)


def report(name: str, f: dict[str, Any]) -> None:
    print(
        f"  {name:<18} export p99 {f['export_p99_quiet_ms']} -> {f['export_p99_ms']} ms"
        f" ({f['export_p99_vs_quiet']}x; http {f['http_p99_ms']}, grpc {f['grpc_p99_ms']})"
        f"  failed {len(f['failed'])}/{f['exports']}"
        f"  fold max {f['fold_delay_max_s']} s ({f['batches_folded']}/{f['batches']} batches)"
        f"  page p99 {f['page_p99_quiet_ms']} -> {f['page_p99_ms']} ms"
        f" ({f['page_p99_vs_quiet']}x) failed {len(f['page_failed'])}/{f['pages']}",
        flush=True,
    )
    for path, attacked in f["page_p99_by_path_ms"].items():
        quiet = f["page_p99_by_path_quiet_ms"].get(path)
        print(f"    team A {path}: p99 {quiet} -> {attacked} ms", flush=True)
    print(f"    cores used quiet {f['cores_quiet']}, attacked {f['cores_attacked']}", flush=True)
    for kind, seen in f["team_b_answers"].items():
        print(f"    team B {kind}: {seen['n']} answers, p99 {seen['p99_ms']} ms", flush=True)


def verdict(attacks: dict[str, dict[str, Any]], args: argparse.Namespace) -> int:
    misses = []
    for name, f in attacks.items():
        if (f["export_p99_vs_quiet"] or 99) > 2:
            misses.append(f"{name}: export p99 {f['export_p99_vs_quiet']}x quiet")
        if f["failed"]:
            misses.append(f"{name}: {len(f['failed'])} failed exports")
        if f["batches_folded"] < f["batches"]:
            misses.append(f"{name}: {f['batches'] - f['batches_folded']} batches unfolded")
        if f["fold_delay_max_s"] > FOLD_DEADLINE_S:
            misses.append(f"{name}: a batch took {f['fold_delay_max_s']} s to fold")
        if (f["page_p99_vs_quiet"] or 99) > 2 or f["page_failed"]:
            misses.append(f"{name}: page p99 {f['page_p99_vs_quiet']}x quiet")
    config = bench_config(
        rounds=args.rounds,
        slice_seconds=args.slice_seconds,
        rate_per_protocol=args.rate,
        attacks=args.attacks,
    )
    write_json(FIGURES, {"config": config, "attacks": attacks, "misses": misses})
    print("  done when holds in every attack" if not misses else "  MISSED: " + "; ".join(misses))
    return 1 if misses else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--slice-seconds", type=float, default=20)
    parser.add_argument("--rate", type=float, default=4, help="team A's exports/s per protocol")
    parser.add_argument("--attacks", nargs="*", default=list(ATTACKS), choices=ATTACKS)
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
