"""Audit log throughput (the lead hooks it into ``make bench``; not a timed test).

Prints:
- generation: the big log is made quickly: the records of one correct table
  day per profile are captured from a ``TableSession`` once, then written again
  and again through ``AuditLog`` (durability ``none``: the writer still seals,
  hashes and writes every record) until it holds ``--records`` records
  (default 1,000,000);
- verify: records/s of :func:`controller.audit.verify_file` on that log, and of
  a keyed verification (HMAC chain) on a keyed copy;
- replay: input events/s of :func:`controller.audit.replay.replay` (engine
  re-run and every output compared) on a log of ``--replay-records`` records.

Usage: ``python benchmarks/audit_bench.py [--records N] [--replay-records N] [--keep DIR]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import secrets
import sys
import tempfile
import time
from pathlib import Path

from controller.audit import AuditLog, verify_file
from controller.audit.replay import replay
from controller.events import parse_event
from controller.profiles import load_profile, profile_names
from controller.session import TableSession
from simulators.dealer import DayPlan, table_day


def _days():
    """Parsed correct table days, one per profile and seed, cycling."""
    cache = {}
    seed = 0
    while True:
        for name in profile_names():
            key = (name, seed % 4)
            if key not in cache:
                profile = load_profile(name)
                plan = DayPlan(start=dt.datetime(2026, 11, 21, 10, tzinfo=dt.UTC))
                cache[key] = (profile, [parse_event(s.event)
                                        for s in table_day(profile, seed % 4, plan)])
            yield cache[key]
        seed += 1


CONTEXT = ("table", "shoe", "round", "state")
WRITER_KEYS = ("seq", "ts", "prev", "hash", "mac", "chain", "kind")


def captured_days() -> list[tuple[str, dict, dict]]:
    """(kind, context, payload) of every record of one correct day per profile."""
    out = []
    for name in profile_names():
        profile = load_profile(name)
        stream = io.StringIO()
        session = TableSession(profile, AuditLog.to_stream(stream), {"durability": "none"})
        for step in table_day(profile, 1, DayPlan(start=dt.datetime(2026, 11, 21, 10,
                                                                      tzinfo=dt.UTC))):
            session.feed(parse_event(step.event))
        for line in stream.getvalue().splitlines():
            record = json.loads(line)
            ctx = {k: record.pop(k) for k in CONTEXT}
            kind = record["kind"]
            payload = {k: v for k, v in record.items() if k not in WRITER_KEYS}
            out.append((kind, ctx, payload))
    return out


def generate_fast(path: Path, records: int, key: bytes | None = None) -> tuple[int, float]:
    """Write the captured days again and again until the log holds ``records`` records."""
    days = captured_days()
    log = AuditLog.open(path, durability="none", key=key)
    start = time.perf_counter()
    while log.head[0] < records:
        for kind, ctx, payload in days:
            log.write(kind, ctx, **payload)
            if log.head[0] >= records:
                break
    elapsed = time.perf_counter() - start
    n = log.head[0]
    log.close()
    return n, elapsed


def generate(path: Path, records: int, key: bytes | None = None) -> tuple[int, float]:
    """A genuine log: sessions over correct table days (for replay)."""
    log = AuditLog.open(path, durability="none", key=key)
    start = time.perf_counter()
    for profile, events in _days():
        session = TableSession(profile, log, {"durability": "none", "command": "bench"})
        for event in events:
            session.feed(event)
        if log.head[0] >= records:
            break
    elapsed = time.perf_counter() - start
    n = log.head[0]
    log.close()
    return n, elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--replay-records", type=int, default=200_000)
    parser.add_argument("--keyed-records", type=int, default=200_000)
    parser.add_argument("--keep", metavar="DIR", help="write the logs here and keep them")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)

        big = root / "bench-big.jsonl"
        big.unlink(missing_ok=True)
        n, elapsed = generate_fast(big, args.records)
        size = big.stat().st_size
        print(f"generate: {n:,} records ({size / 1e6:,.0f} MB) in {elapsed:.1f} s = "
              f"{n / elapsed:,.0f} records/s written (durability none)")

        start = time.perf_counter()
        result = verify_file(big)
        elapsed = time.perf_counter() - start
        assert result.ok, result
        print(f"verify: {result.records:,} records in {elapsed:.1f} s = "
              f"{result.records / elapsed:,.0f} records/s ({size / elapsed / 1e6:,.0f} MB/s)")

        key = secrets.token_bytes(32)
        keyed = root / "bench-keyed.jsonl"
        keyed.unlink(missing_ok=True)
        n, _ = generate_fast(keyed, args.keyed_records, key)
        start = time.perf_counter()
        result = verify_file(keyed, key=key)
        elapsed = time.perf_counter() - start
        assert result.ok and result.mac_checked, result
        print(f"verify --key: {result.records:,} records in {elapsed:.1f} s = "
              f"{result.records / elapsed:,.0f} records/s (hash + HMAC chain)")

        small = root / "bench-replay.jsonl"
        small.unlink(missing_ok=True)
        n, _ = generate(small, args.replay_records)
        start = time.perf_counter()
        replayed = replay([small])
        elapsed = time.perf_counter() - start
        assert replayed.identical, replayed.differences[:3]
        print(f"replay: {replayed.inputs:,} events ({n:,} records) in {elapsed:.1f} s = "
              f"{replayed.inputs / elapsed:,.0f} events/s (engine re-run, every output "
              "compared)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
