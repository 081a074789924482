"""Device path figures (``make bench``): cards through a pty into the audit log.

Prints, from one run on this machine:

- **card latency**: from the simulator's last byte of a card frame (``os.write`` of the
  CARD_OUT frame on the pty's master returned, in the simulator's process) to the card's
  audit record being durable (``AuditLog.input_event`` returned after its fsync, in the
  controller's engine thread), p50 and p99 over ``--cards`` cards (at least 2000). The
  controller is the real one: ``ShoeDriver`` on pyserial on the pty, the
  ``TableRuntime``'s engine thread, ``TableSession.feed`` with the default durability.
  Cards go one at a time (the next is drawn once the last is logged), so this is the
  latency of an idle table, not of a queue; the day's other steps are fed as dealer
  input. ``time.monotonic`` is the same clock in both processes (CLOCK_MONOTONIC).
- beside it, measured in the same run: the **pty round-trip floor** (a frame-sized
  write to a pty, echoed back by another process) and the **fsync floor** (a record-sized
  append + fsync in the log's directory);
- the controller's **peak RSS** (this process: it runs the controller side);
- **bench throughput**: ``shoewarden bench`` (simulator child, drivers, merger, engine,
  log) at pace 0, cards per second, with fsync off (``--durability none``) and, for
  comparison, with the default fsync per input.

Usage: ``python benchmarks/device_bench.py [--cards N] [--shoes N] [--dir DIR]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tty
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.app.bench import BenchOptions, run_bench
from controller.app.runtime import TableRuntime
from controller.audit import AuditLog, open_table_log
from controller.events import parse_event
from controller.profiles import load_profile
from controller.session import TableSession
from drivers.allowlist import Allowlist
from drivers.registry import create_driver
from simulators.dealer import DayPlan, table_day
from simulators.devices import Shoe

PROFILE = "gr-blackjack"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(values: list[float]) -> str:
    return f"p50 {pct(values, 0.50) * 1e3:.3f} ms, p99 {pct(values, 0.99) * 1e3:.3f} ms"


# --------------------------------------------------------------------------- the device child


def device_child() -> None:
    """The simulated shoe in its own process: a pty, the shoe model, commands on stdin
    (``draw`` / ``cut`` / ``quit``); the time the last byte of each card frame was written
    is printed as JSON at ``quit``."""
    cards = json.loads(sys.stdin.readline())
    master, slave = os.openpty()
    tty.setraw(slave)
    os.set_blocking(master, False)
    print(os.ttyname(slave), flush=True)
    shoe = Shoe()
    shoe.load(cards)
    written: list[float] = []
    stdin = sys.stdin.fileno()
    pending = b""
    while True:
        ready, _, _ = select.select([master, stdin], [], [], 0.005)
        now = time.monotonic()
        if master in ready:
            with contextlib.suppress(BlockingIOError):
                shoe.receive(os.read(master, 65536), now)
        card = False
        if stdin in ready:
            line = sys.stdin.readline().strip()
            if line == "quit" or not line:
                break
            if line == "draw":
                shoe.draw()
                card = True
            elif line == "cut":
                shoe.cut_card_out()
        pending += shoe.tick(now)
        while pending:
            try:
                n = os.write(master, pending)
            except BlockingIOError:
                select.select([], [master], [], 0.01)
                continue
            pending = pending[n:]
        if card:
            written.append(time.monotonic())  # the frame's last byte is on the pty
    print(json.dumps(written), flush=True)
    os.close(master)
    os.close(slave)


def echo_child() -> None:
    """Echo everything read on the pty slave path given on argv back to it."""
    fd = os.open(sys.argv[2], os.O_RDWR | os.O_NOCTTY)
    tty.setraw(fd)
    print("ready", flush=True)
    while True:
        data = os.read(fd, 4096)
        if not data or data == b"Q":
            break
        os.write(fd, data)


# --------------------------------------------------------------------------- floors


def pty_round_trip(n: int) -> list[float]:
    master, slave = os.openpty()
    tty.setraw(slave)
    child = subprocess.Popen([sys.executable, __file__, "--echo-child", os.ttyname(slave)],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    child.stdout.readline()
    frame = b"\xa5" + bytes(range(29))  # a CARD_OUT frame's size
    out = []
    for _ in range(n):
        start = time.monotonic()
        os.write(master, frame)
        got = b""
        while len(got) < len(frame):
            got += os.read(master, 4096)
        out.append(time.monotonic() - start)
    os.write(master, b"Q")
    child.wait(10)
    os.close(master)
    os.close(slave)
    return out


def fsync_floor(directory: Path, n: int) -> list[float]:
    path = directory / "fsync-floor.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    record = b"x" * 300 + b"\n"
    out = []
    try:
        for _ in range(n):
            start = time.monotonic()
            os.write(fd, record)
            os.fsync(fd)
            out.append(time.monotonic() - start)
    finally:
        os.close(fd)
        path.unlink()
    return out


# --------------------------------------------------------------------------- card latency


def card_latency(directory: Path, shoes: int, min_cards: int,
                 on_log: Callable[[Path], None] | None = None, table: str = "T1"
                 ) -> tuple[list[float], int]:
    """``on_log``: the log goes in the layout ``bench --log`` writes
    (``directory/logs/<table>/<table>-<date>.jsonl``) and is handed to it once open (the
    NATS bench starts the table's forwarder on it there)."""
    profile = load_profile(PROFILE)
    steps = table_day(profile, 11, DayPlan(shoes=shoes))
    cards = [s.event["card"] for s in steps if s.event["type"] == "card"]
    while len(cards) < min_cards:
        shoes += 1
        steps = table_day(profile, 11, DayPlan(shoes=shoes))
        cards = [s.event["card"] for s in steps if s.event["type"] == "card"]
    child = subprocess.Popen([sys.executable, __file__, "--device-child"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(json.dumps(cards) + "\n")
    child.stdin.flush()
    port = child.stdout.readline().strip()
    ident = Shoe().identity
    allow = Allowlist.from_config({"allowlist": [{
        "kind": ident.kind, "model": ident.model, "serial": ident.serial,
        "firmware": ident.firmware, "firmware_hash": ident.firmware_hash}]})
    driver = create_driver("shoe", {"driver": "swp-shoe", "port": port}, allowlist=allow)
    if on_log is None:
        log = AuditLog.open(directory / "latency.jsonl", durability="input")
    else:
        log = open_table_log(directory / "logs", table, durability="input")
        on_log(Path(log.writer.name))
    durable: list[float] = []
    synced: list[float] = []  # the card's own fsync, to take out of its software time
    plain_input = log.input_event
    sink = log.writer._sink
    plain_sync = sink.sync
    spent = [0.0]

    def timed_sync() -> None:
        t0 = time.monotonic()
        plain_sync()
        spent[0] += time.monotonic() - t0

    sink.sync = timed_sync  # type: ignore[method-assign]

    def timed_input(event: Any, **kw: Any) -> None:
        spent[0] = 0.0
        plain_input(event, **kw)
        if event.type == "card":
            durable.append(time.monotonic())
            synced.append(spent[0])

    log.input_event = timed_input  # type: ignore[method-assign]
    session = TableSession(profile, log, {"command": "device_bench"})
    session.start(table)
    fed = threading.Semaphore(0)
    connected = threading.Event()

    def on_fed(event: Any, outputs: Any, line: Any) -> None:
        if event.type == "device_connected":
            connected.set()
        else:
            fed.release()

    runtime = TableRuntime(session, devices={"shoe": driver}, on_fed=on_fed).start()
    if not connected.wait(10):
        raise SystemExit("device bench: the simulated shoe did not identify")
    for step in steps:
        kind = step.event["type"]
        if kind == "card":
            child.stdin.write("draw\n")
            child.stdin.flush()
        elif kind == "cut_card":
            child.stdin.write("cut\n")
            child.stdin.flush()
        else:
            runtime.post_event(parse_event(step.event))
        if not fed.acquire(timeout=10):
            raise SystemExit(f"device bench: step {step.event} was not fed")
    runtime.request_stop()
    runtime.wait(10)
    session.close()
    child.stdin.write("quit\n")
    child.stdin.flush()
    written = json.loads(child.stdout.readline())
    child.wait(10)
    if len(written) != len(durable) or session.tally.deviations:
        raise SystemExit(f"device bench: {len(written)} cards written, {len(durable)} logged, "
                         f"deviations {dict(session.tally.deviations)}")
    CARD_SYNC.extend(synced)
    return [d - w for w, d in zip(written, durable, strict=True)], len(cards)


CARD_SYNC: list[float] = []  # per card, the fsync inside its latency (card_latency fills it)


def throughput(directory: Path, durability: str, shoes: int) -> tuple[int, float]:
    opts = BenchOptions(profile=PROFILE, shoes=shoes, seed=7, pace=0.0, durability=durability,
                        log=str(directory / f"bench-{durability}"))
    result = run_bench(opts, io.StringIO())
    if result.code != 0:
        raise SystemExit(f"device bench: the bench run failed: {result.failure}")
    return result.fed_cards, result.elapsed


def main() -> int:
    """Exit 1 when the software time misses its target (as the other benchmarks do)."""
    if len(sys.argv) > 1 and sys.argv[1] == "--device-child":
        device_child()
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--echo-child":
        echo_child()
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cards", type=int, default=2000, help="cards through the pty (>= 2000)")
    ap.add_argument("--shoes", type=int, default=8, help="shoes in the throughput day")
    ap.add_argument("--dir", help="directory for the logs (default: a temporary one)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="shoewarden-device-bench-") as tmp:
        directory = Path(args.dir) if args.dir else Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        latency, cards = card_latency(directory, 7, max(2000, args.cards))
        rtt = pty_round_trip(len(latency))
        floor = fsync_floor(directory, len(latency))
        print(f"device: {cards} cards through a pty, one at a time ({PROFILE}, fsync per "
              "input)")
        print(f"  card latency, simulator's last byte -> audit record fsynced: {ms(latency)} "
              f"(mean {statistics.fmean(latency) * 1e3:.3f} ms)")
        print(f"  pty round trip (frame-sized write, echoed by another process): {ms(rtt)}")
        software = [lat - sync for lat, sync in zip(latency, CARD_SYNC, strict=True)]
        target = pct(rtt, 0.99) + 0.15e-3
        met = pct(software, 0.99) <= target
        mark = "ok" if met else "MISSED"
        print(f"  software time (the latency without the card's own fsync): {ms(software)} "
              f"(target p99 ≤ pty p99 + 0.15 ms = {target * 1e3:.3f} ms)  {mark}")
        print(f"  fsync floor (300-byte append + fsync, same directory): {ms(floor)}")
        none_cards, none_s = throughput(directory, "none", args.shoes)
        input_cards, input_s = throughput(directory, "input", args.shoes)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rss_mib = rss / 1024 if sys.platform != "darwin" else rss / 2**20
        print(f"  controller peak RSS: {rss_mib:.1f} MiB")
        print(f"bench throughput ({PROFILE}, {args.shoes} shoes, pace 0, simulator child + "
              f"drivers + engine + log): fsync off {none_cards / none_s:,.0f} cards/s "
              f"({none_cards} cards in {none_s:.2f} s); fsync per input "
              f"{input_cards / input_s:,.0f} cards/s")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
