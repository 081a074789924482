"""Speed and memory figures (``make bench``). Targets live here, not in timed tests.

Prints:
- engine throughput: events per second through ``TableEngine.handle`` over
  correct table days of every profile (no log);
- session throughput with the audit log at each durability policy
  (``none``, ``input`` = fsync per input event, the default);
- the fsync floor on this disk (p50/p99 of one small write + fsync);
- peak RSS of this process.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from controller.audit import AuditLog
from controller.engine import TableEngine
from controller.events import parse_event
from controller.profiles import load_profile, profile_names
from controller.session import TableSession
from simulators.dealer import DayPlan, table_day


def _events(name: str, seed: int) -> list:
    return [parse_event(s.event) for s in table_day(load_profile(name), seed, DayPlan(shoes=2))]


def bench_engine(repeat: int) -> None:
    total = 0
    elapsed = 0.0
    for name in profile_names():
        for seed in range(repeat):
            events = _events(name, seed)
            engine = TableEngine(load_profile(name))
            start = time.perf_counter()
            for event in events:
                engine.handle(event)
            elapsed += time.perf_counter() - start
            total += len(events)
    print(f"engine: {total} events in {elapsed:.3f} s = {total / elapsed:,.0f} events/s "
          f"({elapsed / total * 1e6:.1f} µs/event)")


def bench_session(policy: str, events: list, name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "audit.jsonl"
        log = AuditLog.open(path, durability=policy)
        session = TableSession(load_profile(name), log)
        lat = []
        start = time.perf_counter()
        for event in events:
            t0 = time.perf_counter()
            session.feed(event)
            lat.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - start
        session.close()
        records = sum(1 for _ in path.open())
    q = statistics.quantiles(lat, n=100)
    print(f"session+log durability={policy:5}: {len(events)} events, {records} records, "
          f"{len(events) / elapsed:,.0f} events/s; per event p50 {q[49] * 1e3:.3f} ms, "
          f"p99 {q[98] * 1e3:.3f} ms")


def bench_fsync(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        fd = os.open(Path(tmp) / "f", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        lat = []
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, b"x" * 200 + b"\n")
            os.fsync(fd)
            lat.append(time.perf_counter() - t0)
        os.close(fd)
    q = statistics.quantiles(lat, n=100)
    print(f"fsync floor: p50 {q[49] * 1e3:.3f} ms, p99 {q[98] * 1e3:.3f} ms over {n} writes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="seeds per profile")
    args = parser.parse_args()
    bench_engine(args.repeat)
    events = _events("gr-blackjack", 1)
    for policy in ("none", "input"):
        bench_session(policy, events, "gr-blackjack")
    bench_fsync(500)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak RSS: {peak / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
