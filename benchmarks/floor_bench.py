"""The floor's figures (``make bench``; not a timed test).

Prints:
- catch-up: records/s of a fresh floor reading a day of logs already written — the day of
  ``--tables`` tables, each a correct table day per profile written by the real session
  into the layout ``bench`` writes; the floor verifies every chain, folds every record,
  raises the alerts and indexes every record in SQLite (target ≥ 50,000 records/s); and
  the same without indexing the records (the dealer display's mode); the same into
  PostgreSQL is in ``floor_nats_bench.py``, with the other database floor figures;
- the dealer display's cost to its table: per-event time of a table day (session and log,
  fsync per input) with and without its display following the log in the same process;
- alert latency: ``--live-tables`` benches (simulated devices, several with dealer
  mistakes and faults) deal at once while the floor follows them and serves its event
  stream; for every alert, the time from its deviation record's ``ts`` (written, and
  fsynced under the default durability, by the table's writer) to the alert event
  arriving at a client of ``/api/events``, p50/p99 (target p99 ≤ 250 ms). ``ts`` is taken
  before the fsync, so the figure includes the table's fsync.

Usage: ``python benchmarks/floor_bench.py [--tables N] [--live-tables N] [--pace S]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx2 as httpx
import orjson

from controller.audit import open_table_log
from controller.events import parse_event
from controller.profiles import load_profile, profile_names
from controller.session import TableSession
from floor.core import Floor, parse_ts
from floor.serve import ServerThread
from floor.store import FloorStore, SqlIndex
from floor.web import floor_app
from simulators.dealer import DayPlan, table_day

LIVE = (("gr-blackjack", "dealer-mistakes"), ("gr-banco-punto", "cut-and-shuffle-mistakes"),
        ("gr-stud-poker", "stud-foreign-card"), ("gr-blackjack", "shoe-jam-door"),
        ("gr-banco-punto", None))


class Targets:
    """Each figure judged once against its target: the word printed beside it, and the
    names of those missed (the script exits 1 when any is, as paths.py does)."""

    def __init__(self) -> None:
        self.missed: list[str] = []

    def mark(self, name: str, ok: bool) -> str:
        if not ok:
            self.missed.append(name)
        return "OK" if ok else "MISSED"


def write_day(root: Path, tables: int) -> int:
    """``tables`` tables' logs of one day (correct days, the profiles in turn)."""
    date = dt.date(2026, 11, 21)
    names = profile_names()
    days: dict[str, list] = {}
    total = 0
    for i in range(tables):
        name = names[i % len(names)]
        if name not in days:
            profile = load_profile(name)
            days[name] = [parse_event(s.event) for s in table_day(
                profile, 1, DayPlan(start=dt.datetime(2026, 11, 21, 10, tzinfo=dt.UTC)))]
        table = f"T{i + 1:03d}"
        log = open_table_log(root, table, date, durability="none")
        session = TableSession(load_profile(name), log, {"durability": "none"})
        session.start(table)
        for event in days[name]:
            session.feed(event)
        total += log.head[0]
        log.close()
    return total


def catch_up(root: Path, work: Path, keep_records: bool,
             store: SqlIndex | None = None) -> tuple[int, float]:
    if store is None:
        store = FloorStore(str(work / f"floor-{keep_records}.sqlite"))
    floor = Floor([root], store, audit_dir=work / "floorlog", keep_records=keep_records,
                  silent_after=float("inf"))
    start = time.perf_counter()
    n = 0
    while True:
        k = floor.poll()
        n += k
        if k == 0:
            break
    elapsed = time.perf_counter() - start
    floor.store.close()
    return n, elapsed


def listen_for_alerts(port: int, got: list[tuple[float, dict]], stop: threading.Event,
                      ready: threading.Event, tries: int) -> None:
    """Follow the floor's live stream (``/api/events``, SSE) on ``port``: each alert, with
    the time it arrived, into ``got``; ``ready`` once connected; until ``stop``. Tries to
    connect ``tries`` times, 0.1 s apart (a floor process that is still starting)."""
    for _ in range(tries):
        try:
            with httpx.stream("GET", f"http://127.0.0.1:{port}/api/events",
                              timeout=None) as r:
                ready.set()
                event = None
                for line in r.iter_lines():
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: ") and event == "alert":
                        got.append((time.time(), orjson.loads(line[6:])["alert"]))
                    if stop.is_set():
                        return
            return
        except httpx.HTTPError:
            time.sleep(0.1)


def alert_latency(n: int, pace: float, work: Path) -> tuple[list[float], int]:
    logs = work / "live"
    logs.mkdir()
    floor = Floor([logs], FloorStore(str(work / "live.sqlite")), audit_dir=work / "livelog",
                  silent_after=float("inf"))
    web = ServerThread(floor_app(floor), "127.0.0.1", 0).start()
    got: list[tuple[float, dict]] = []
    stop = threading.Event()
    ready = threading.Event()
    threading.Thread(target=listen_for_alerts, args=(web.port, got, stop, ready, 1),
                     daemon=True).start()
    ready.wait(10)
    benches = []
    for i in range(n):
        profile, scenario = LIVE[i % len(LIVE)]
        argv = [sys.executable, "-m", "controller", "bench", "--profile", profile, "--table",
                f"L{i + 1:02d}", "--log", str(logs), "--pace", f"{pace:g}", "--seed",
                str(100 + i), "--no-progress", "--shoes", "2"]
        if scenario:
            argv += ["--scenario", scenario]
        out = open(work / f"bench-{i}.out", "w")  # noqa: SIM115 - closed with the run
        benches.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT))
    for b in benches:
        b.wait()
    for i, b in enumerate(benches):
        if b.returncode not in (0, 1):
            tail = (work / f"bench-{i}.out").read_text().strip().splitlines()[-2:]
            print(f"  bench L{i + 1:02d} exited {b.returncode}: {' / '.join(tail)}")
    time.sleep(1.0)
    stop.set()
    web.stop()
    floor.store.close()
    latencies = []
    for received, alert in got:
        if alert["code"] in ("TABLE_SILENT",):
            continue
        written = parse_ts(alert["ts"])
        if written is not None:
            latencies.append((received - written) * 1000)
    return latencies, sum(1 for b in benches if b.returncode not in (0, 1))


def display_overhead(work: Path, rounds: int = 2) -> dict[bool, list[float]]:
    """Per-event time (session + log, fsync per input) of a table day with and without
    its dealer display following the log in the same process (same-run A/B, alternated)."""
    from floor.display import start_display

    profile = load_profile("gr-banco-punto")
    events = [parse_event(s.event) for s in table_day(
        profile, 1, DayPlan(start=dt.datetime(2026, 11, 21, 10, tzinfo=dt.UTC)))]
    times: dict[bool, list[float]] = {False: [], True: []}
    for i in range(rounds * 2):
        shown = bool(i % 2)
        root = work / f"ab-{i}"
        log = open_table_log(root, "AB-01", dt.date(2026, 11, 21), durability="input")
        session = TableSession(profile, log, {"durability": "input"})
        session.start("AB-01")
        display = start_display(root, "AB-01", "127.0.0.1:0") if shown else None
        for event in events:
            t = time.perf_counter()
            session.feed(event)
            times[shown].append(time.perf_counter() - t)
        log.close()
        if display is not None:
            display.stop()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=60,
                        help="tables in the day of logs to catch up on (default 60)")
    parser.add_argument("--live-tables", type=int, default=10,
                        help="benches dealing at once for the alert latency (default 10)")
    parser.add_argument("--pace", type=float, default=0.02,
                        help="seconds between the benches' dealer steps (default 0.02)")
    args = parser.parse_args(argv)
    targets = Targets()
    with tempfile.TemporaryDirectory(prefix="floor-bench-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        records = write_day(work / "day", args.tables)
        print(f"floor: a day of {args.tables} tables, {records:,} records "
              f"(written in {time.perf_counter() - t0:.1f} s)")
        n, s = catch_up(work / "day", work, keep_records=True)
        rate = n / s
        print(f"floor catch-up (verify, fold, alerts, SQLite index): {n:,} records in "
              f"{s:.2f} s = {rate:,.0f} records/s (target >= 50,000: "
              f"{targets.mark('catch-up', rate >= 50_000)})")
        n2, s2 = catch_up(work / "day", work, keep_records=False)
        print(f"floor catch-up without indexing records (dealer display): {n2 / s2:,.0f} "
              "records/s")
        ab = display_overhead(work)
        q0 = statistics.quantiles(ab[False], n=100, method="inclusive")
        q1 = statistics.quantiles(ab[True], n=100, method="inclusive")
        print(f"table per event (session + log, fsync per input), without / with its dealer "
              f"display in the process: p50 {q0[49] * 1e3:.3f} / {q1[49] * 1e3:.3f} ms, p99 "
              f"{q0[98] * 1e3:.3f} / {q1[98] * 1e3:.3f} ms ({len(ab[True])} events each)")
        latencies, failed = alert_latency(args.live_tables, args.pace, work)
        if len(latencies) < 2:
            print(f"floor alert latency: only {len(latencies)} alert(s) seen")
            return 1
        q = statistics.quantiles(latencies, n=100, method="inclusive")
        p50, p99 = statistics.median(latencies), q[98]
        print(f"floor alert latency, {args.live_tables} tables dealing at once "
              f"({len(latencies)} alerts; deviation record written at the table -> alert on "
              f"the event stream): p50 {p50:.0f} ms, p99 {p99:.0f} ms, max "
              f"{max(latencies):.0f} ms (target p99 <= 250 ms: "
              f"{targets.mark('alert latency', p99 <= 250)})"
              + (f"; {failed} bench(es) failed" if failed else ""))
    if targets.missed:
        print(f"floor: missed: {', '.join(targets.missed)}")
    return 1 if targets.missed else 0


if __name__ == "__main__":
    sys.exit(main())
