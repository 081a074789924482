"""Fuzz of the controller's whole receive path: device bytes → driver → input → audit log.

Each stream (:mod:`simulators.wirefuzz`, built from its seed) is fed, chunk by chunk at its
own times, to a real driver under the runtime's :class:`~drivers.supervisor.Supervisor`;
what each poll makes is handed to :meth:`TableRuntime.deliver`, which routes, sequences and
logs it exactly as the engine thread does, into a real session writing a real audit log.
Afterwards the log must verify, line by line, through the same text boundary every reader
uses.

Three outcomes count against the controller:

- an **escape**: the driver raised (``feed``/``poll`` must never raise for any bytes);
- a **stopped table**: routing, the engine or the audit writer raised — in a live table
  the engine thread would stop with ``CONTROLLER_ERROR``;
- a **bad log**: what was written does not decode or does not verify.

``make bench`` runs ≥ 100,000 streams (``--streams``); the tests run a few hundred.
Prints streams, bytes, escapes, stopped tables, bad logs, and seconds.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cache

from controller.app.runtime import DirectSequencer, TableRuntime
from controller.audit import AuditLog
from controller.audit.verify import verify_lines
from controller.profiles import Profile, load_profile
from controller.session import TableSession
from drivers.allowlist import AllowedDevice, Allowlist
from drivers.scanner import ScannerDriver
from drivers.shoe import ShoeDriver
from drivers.shuffler import ShufflerDriver
from drivers.swp import SwpDriver
from simulators import wirefuzz

DRIVERS: dict[str, type[SwpDriver]] = {"shoe": ShoeDriver, "scanner": ScannerDriver,
                                       "shuffler": ShufflerDriver}
PROFILES = {"shoe": "gr-blackjack", "scanner": "gr-blackjack",
            "shuffler": "gr-blackjack-shuffler"}
T0 = 1_795_000_000.0  # the fuzz's UTC epoch (2026-11-18): times are stream-relative


@cache
def _profile(name: str) -> Profile:
    return load_profile(name)


def _allowlist(device: str) -> Allowlist:
    return Allowlist([AllowedDevice(wirefuzz.MODEL, wirefuzz.SERIAL, wirefuzz.FIRMWARE,
                                    wirefuzz.FIRMWARE_HASH, device)])


@dataclass
class StreamResult:
    seed: int
    device: str
    size: int
    records: int = 0
    cards: int = 0  # card inputs that reached the engine
    escape: str | None = None  # the driver raised
    stopped: str | None = None  # routing / engine / log raised
    bad_log: str | None = None  # the log does not verify


def run_stream(seed: int, *, pieces: int = 40) -> StreamResult:
    """Generate the stream of ``seed`` and push it through the receive path."""
    stream = wirefuzz.generate(seed, pieces=pieces)
    device = stream.device
    result = StreamResult(seed, device, stream.size)
    now_box = [0.0]

    def utc() -> str:
        t = T0 + now_box[0]
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"

    out = io.StringIO()
    session = TableSession(_profile(PROFILES[device]), AuditLog.to_stream(out))
    session.start("FUZZ")
    driver = DRIVERS[device](device, allowlist=_allowlist(device), utc=utc)
    runtime = TableRuntime(session, devices={device: driver},
                           driver_names={device: device}, sequencer=DirectSequencer(),
                           clock=lambda: now_box[0], utc=utc)
    supervisor = runtime.slots[device].supervisor
    stage = "start"
    try:
        outputs = supervisor.start(0.0) + supervisor.poll(0.0)
        stage = "route"
        runtime.deliver(device, outputs)
        for chunk, now in stream.chunks:
            now_box[0] = now
            stage = "driver"
            outputs = driver.feed(chunk, now) if driver.state in ("handshake", "ready") else []
            outputs += supervisor.poll(now)
            driver.outbox.clear()  # nobody answers: the fuzz device ignores the controller
            stage = "route"
            runtime.deliver(device, outputs)
        stage = "driver"
        outputs = driver.lost("end of stream", now_box[0])
        stage = "route"
        runtime.deliver(device, outputs)
        session.close()
    except Exception:
        what = traceback.format_exc(limit=-3)
        if stage == "route":
            result.stopped = what
        else:
            result.escape = what
        return result
    result.cards = session.tally.cards
    lines = out.getvalue().splitlines(keepends=True)
    result.records = len(lines)
    try:
        verdict = verify_lines(lines, source=f"fuzz seed {seed}")
    except Exception:
        result.bad_log = traceback.format_exc(limit=-3)
        return result
    if not verdict.ok:
        result.bad_log = f"line {verdict.first_bad_line}: {verdict.reason}"
    return result


@dataclass
class FuzzSummary:
    streams: int = 0
    bytes: int = 0
    records: int = 0
    cards: int = 0
    escapes: list[StreamResult] = field(default_factory=list)
    stopped: list[StreamResult] = field(default_factory=list)
    bad_logs: list[StreamResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failures(self) -> list[StreamResult]:
        return self.escapes + self.stopped + self.bad_logs


def fuzz(seeds: range, *, pieces: int = 40) -> FuzzSummary:
    summary = FuzzSummary()
    started = time.perf_counter()
    for seed in seeds:
        r = run_stream(seed, pieces=pieces)
        summary.streams += 1
        summary.bytes += r.size
        summary.records += r.records
        summary.cards += r.cards
        if r.escape:
            summary.escapes.append(r)
        if r.stopped:
            summary.stopped.append(r)
        if r.bad_log:
            summary.bad_logs.append(r)
    summary.seconds = time.perf_counter() - started
    return summary


def _fuzz_part(args: tuple[int, int, int]) -> FuzzSummary:
    first, last, pieces = args
    logging.disable(logging.CRITICAL)  # the drivers log every oddity; the counts are here
    return fuzz(range(first, last), pieces=pieces)


def fuzz_parallel(seeds: range, *, pieces: int = 40, jobs: int | None = None) -> FuzzSummary:
    """:func:`fuzz` over ``seeds`` split across ``jobs`` processes (every core by default)."""
    jobs = jobs or os.cpu_count() or 1
    step = max(1, -(-len(seeds) // (jobs * 8)))
    parts = [(a, min(a + step, seeds.stop), pieces) for a in range(seeds.start, seeds.stop, step)]
    total = FuzzSummary()
    started = time.perf_counter()
    with ProcessPoolExecutor(jobs) as pool:
        for s in pool.map(_fuzz_part, parts):
            total.streams += s.streams
            total.bytes += s.bytes
            total.records += s.records
            total.cards += s.cards
            total.escapes += s.escapes
            total.stopped += s.stopped
            total.bad_logs += s.bad_logs
    total.seconds = time.perf_counter() - started
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=100_000)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--pieces", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=None, help="processes (default: every core)")
    args = ap.parse_args(argv)
    s = fuzz_parallel(range(args.first_seed, args.first_seed + args.streams),
                      pieces=args.pieces, jobs=args.jobs)
    print(f"receive-path fuzz ({args.jobs or os.cpu_count()} processes): {s.streams:,} "
          f"streams, {s.bytes / 1e6:.1f} MB of device bytes, {s.records:,} log records, "
          f"{s.cards:,} cards, {s.seconds:.1f} s "
          f"({s.streams / s.seconds:,.0f} streams/s)")
    print(f"  escapes {len(s.escapes)} (target 0)   stopped tables {len(s.stopped)} "
          f"(target 0)   bad logs {len(s.bad_logs)} (target 0)")
    for r in s.failures[:5]:
        print(f"  seed {r.seed} ({r.device}):\n{r.escape or r.stopped or r.bad_log}")
    return 1 if s.failures else 0


if __name__ == "__main__":
    sys.exit(main())
