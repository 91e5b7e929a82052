"""``make bench-soak``: the whole product under steady load for half an hour, then three faults.

One run, all children of this script on a throwaway PostgreSQL and Redis:

1. **Capacity.** The senders post flat out for ``--capacity-seconds`` while the fold, beat and
   web run: the ingest capacity of this machine, now, with everything else on it.
2. **Soak.** ``--fraction`` of that rate for ``--minutes``, the API read every few seconds.
   Every ``--sample-seconds``: the memory of each component (PSS: shared pages split among
   their sharers), the fold lag (age of the oldest acknowledged batch not yet folded) and the
   API's answer. Pass: memory of every component flat after the warm-up (the median PSS of
   the last five minutes within 10 % of the first five's: single samples catch tasks'
   transient peaks), no error anywhere, fold lag bounded.
3. **Faults**, the load still on: Redis stopped for ``--outage-seconds`` (ingest must keep
   acknowledging; the fold resumes when it returns), the Celery worker SIGKILLed mid-fold and
   restarted, PostgreSQL restarted (ingest answers 503 with Retry-After meanwhile).
4. **Books.** Once the fold has caught up: stored rows == spans acknowledged, every batch
   folded, and the folded span counts == stored rows.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path
from typing import Any

from _children import collect, stop_processes
from _soak_stack import (
    ApiClient,
    Senders,
    free_ports,
    merge_results,
    product_children,
    window,
)
from _soak_watch import (
    Sampler,
    Watchdog,
    books,
    faults,
    memory_growth,
    query,
    seconds,
    wait_for_fold,
)
from _stack import (
    PRODUCTION_SETTINGS,
    ROOT,
    BenchStack,
    bench_config,
    interrupt_on_sigterm,
    write_json,
)

from latencyboard.local.embedded import EmbeddedRedis, free_port
from latencyboard.storage import tables

FIGURES = ROOT / "var" / "bench" / "soak.json"
MEMORY_GROWTH_LIMIT = 0.10
LEVEL_WINDOW_MINUTES = 5  # memory's level: the median PSS of the first and last five minutes


def run(args: argparse.Namespace) -> int:
    with BenchStack(log_dir=ROOT / "var" / "bench" / "soak-logs") as stack:
        redis = EmbeddedRedis(stack.root / "redis", free_port(), log_path=stack.root / "redis.log")
        redis.start()
        stack.env.update(
            {
                **PRODUCTION_SETTINGS,
                "REDIS_URL": redis.url,
                "STATIC_ROOT": str(stack.root / "static"),
            }
        )
        stack.manage("collectstatic", "--no-input")
        Path(stack.env["LATENCYBOARD_VAR_DIR"]).mkdir(parents=True, exist_ok=True)  # beat's file
        ingest = stack.start_ingest(processes=args.processes)
        (web_port,) = free_ports(1)
        children = product_children(stack, web_port)
        web, worker, beat = children
        watchdog = Watchdog(children, stack.env)
        try:
            for child in children:
                child.start(stack.env)
            watchdog.start()
            api = ApiClient(stack, web_port)
            senders = Senders(args.senders, ingest.http_port, stack.token)
            end = time.time() + 10**7  # moved to the real end below
            senders.start(end, 0)
            capacity_t0 = time.time()
            time.sleep(args.capacity_seconds)
            capacity_t1 = time.time()
            senders.set_rate(-1)  # paused until the paced rate is set
            pipeline = api.pipeline_ids()[0]

            def ingest_tree() -> list[Any]:
                from _meters import process_tree

                return process_tree(ingest.pid)()

            def postgres_tree() -> list[Any]:
                from _meters import postmaster_pid, process_tree

                return process_tree(postmaster_pid(stack))()

            groups = {
                "ingest": ingest_tree,
                "web": web.tree,
                "worker": worker.tree,
                "beat": beat.tree,
                "postgres": postgres_tree,
            }
            time.sleep(2)
            wait_for_fold(stack.database_url, 300)
            soak_t0 = time.time()
            sampler = Sampler(groups, stack.database_url, api, pipeline, args.sample_seconds)
            sampler.start()
            # The capacity phase's rate, measured from the senders' own per-second record
            # once they report; until then a provisional rate from the database.
            stored = query(stack.database_url, f"SELECT count(*) FROM {tables.SPAN}")  # noqa: S608
            capacity = stored / (capacity_t1 - capacity_t0)
            target_requests = args.fraction * capacity / 512
            senders.set_rate(target_requests)
            print(
                f"soak: capacity ≈ {capacity:,.0f} spans/s with everything running; "
                f"soaking at {args.fraction:.0%} for {args.minutes} min",
                flush=True,
            )
            soak_t1 = soak_t0 + args.minutes * 60
            time.sleep(max(0.0, soak_t1 - time.time()))
            steps = faults(stack, redis, worker, args.outage_seconds) if args.faults else []
            senders.end.value = time.time()
            record = merge_results(collect(senders.results, senders.processes, timeout=180))
            stop_processes(senders.processes)
            fold_tail = wait_for_fold(stack.database_url, 600)
            watchdog.halt.set()
            sampler.halt.set()
            sampler.join()
            acknowledged = sum(record["acked"].values())
            ledger = books(stack.database_url, acknowledged)
            warm = soak_t0 + args.warmup_minutes * 60
            soak_samples = [s for s in sampler.samples if s["t"] < soak_t1]
            growth = memory_growth(soak_samples, warm, LEVEL_WINDOW_MINUTES * 60)
            lags = [s["fold_lag_s"] for s in soak_samples if s["t"] >= warm]
            api_statuses = [s["api"][0] for s in soak_samples]
            api_ms = sorted(s["api"][1] for s in soak_samples)
            capacity_window = window(record, capacity_t0, capacity_t1)
            figures = {
                "config": bench_config(**vars(args)),
                "capacity_spans_per_s": round(
                    capacity_window["acked_spans"] / (capacity_t1 - capacity_t0)
                ),
                "soak": {
                    **window(record, soak_t0, soak_t1),
                    "spans_per_s": round(
                        window(record, soak_t0, soak_t1)["acked_spans"] / (soak_t1 - soak_t0)
                    ),
                    "fold_lag_s_max_after_warmup": max(lags) if lags else None,
                    "fold_lag_s_median_after_warmup": sorted(lags)[len(lags) // 2]
                    if lags
                    else None,
                    "api_reads": len(api_statuses),
                    "api_non_200": sum(1 for s in api_statuses if s != 200),
                    "api_ms_p50": api_ms[len(api_ms) // 2] if api_ms else None,
                    "api_ms_p95": api_ms[int(len(api_ms) * 0.95)] if api_ms else None,
                    "pss": growth,
                    "restarts": watchdog.during(soak_t0, soak_t1),
                },
                "faults": [
                    {
                        **step,
                        **window(record, step["t0"], step["t1"]),
                        "api_statuses": [
                            s["api"][0]
                            for s in sampler.samples
                            if step["t0"] <= s["t"] < step["t1"]
                        ],
                        "restarts": watchdog.during(step["t0"], step["t1"]),
                    }
                    for step in steps
                ],
                "fold_caught_up_s_after_load_stopped": seconds(fold_tail),
                "books": ledger,
                "samples": sampler.samples,
            }
        finally:
            for child in reversed(children):
                child.stop()
            redis.stop()
    write_json(FIGURES, figures)
    return report(figures)


def report(figures: dict[str, Any]) -> int:
    soak, ledger = figures["soak"], figures["books"]
    print(f"capacity (everything running): {figures['capacity_spans_per_s']:,} spans/s")
    print(
        f"soak: {soak['spans_per_s']:,} spans/s for {figures['config']['minutes']} min; "
        f"statuses {soak['statuses']}; request p99 {soak['latency_p99_ms']} ms"
    )
    print(
        f"fold lag after warm-up: median {soak['fold_lag_s_median_after_warmup']:.1f} s, "
        f"max {soak['fold_lag_s_max_after_warmup']:.1f} s"
    )
    print(
        f"API: {soak['api_reads']} reads, {soak['api_non_200']} not 200, "
        f"p50 {soak['api_ms_p50']} ms, p95 {soak['api_ms_p95']} ms"
    )
    for name, pss in soak["pss"].items():
        print(
            f"PSS {name:8s} {pss['after_warmup_mib']:8.1f} → {pss['end_mib']:8.1f} MiB "
            f"(peak {pss['peak_mib']:.1f}, growth {pss['growth']:+.1%}); level "
            f"{pss['first_median_mib']:.1f} → {pss['last_median_mib']:.1f} MiB "
            f"({pss['level_growth']:+.1%})"
        )
    for step in figures["faults"]:
        extra = {k: v for k, v in step.items() if k not in ("fault", "t0", "t1")}
        print(f"fault: {step['fault']}: {extra}")
    print(f"books: {ledger}")
    failures = []
    if ledger["stored"] != ledger["acknowledged"]:
        failures.append("stored != acknowledged")
    if ledger["folded_batch_spans"] != ledger["stored"] or ledger["unfolded_batches"]:
        failures.append("not every stored span was folded")
    if set(soak["statuses"]) != {"200"} or soak["api_non_200"] or soak["restarts"]:
        failures.append("errors during the soak")
    grown = [n for n, r in soak["pss"].items() if r["level_growth"] > MEMORY_GROWTH_LIMIT]
    if grown:
        failures.append(
            f"memory (PSS) grew more than {MEMORY_GROWTH_LIMIT:.0%}: {', '.join(grown)}"
        )
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--warmup-minutes", type=float, default=5)
    parser.add_argument("--fraction", type=float, default=0.5, help="share of capacity")
    parser.add_argument("--capacity-seconds", type=float, default=20)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--processes", type=int, default=2, help="ingest worker processes")
    parser.add_argument("--sample-seconds", type=float, default=10)
    parser.add_argument("--outage-seconds", type=float, default=60)
    parser.add_argument("--no-faults", dest="faults", action="store_false")
    args = parser.parse_args()
    interrupt_on_sigterm()
    started = dt.datetime.now(dt.UTC)
    code = run(args)
    print(f"soak: {dt.datetime.now(dt.UTC) - started} in all")
    return code


if __name__ == "__main__":
    sys.exit(main())
