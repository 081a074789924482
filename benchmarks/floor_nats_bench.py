"""The database floor's figures (``make bench``; not a timed test): NATS JetStream and
PostgreSQL, on private servers started as the tests start them (``tests/servers.py``:
Debian's ``nats-server -js`` and a PostgreSQL cluster in a temp dir, fsync off, run as an
unprivileged user when this runs as root).

Prints:

- **backlog into PostgreSQL** (target ≥ 50,000 records/s): a day of ``--tables`` tables'
  logs, written by the real session, taken by a fresh floor that verifies every chain,
  folds every record, raises the alerts and commits every record to ``audit_records``:
  (a) from the log files (``floor --logs DIR --db postgresql://…``: the shared path past
  the transport, ``Floor.ingest``, alone), the best of ``--repeat`` runs (the machine is
  shared: the others' load only ever slows a run down); (b) from the stream (``floor
  --nats``): the same day published first by the real forwarder, then drained by the
  floor's durable consumer, acknowledging each record after its commit;
- **alert latency over NATS** (target p99 ≤ 250 ms): ``--live-tables`` simulated tables
  publishing at once. Each is a lightweight table, not a full bench (2 cores): a thread
  feeding a Banco Punto day with three dealer mistakes (``config/examples/``) to the real
  session at ``--pace`` seconds an event, writing its real log (fsync per input), with the
  real forwarder publishing it (on a thread, ``forwarder_for_log``: ``bench --publish``
  runs the same forwarder in a child process, but 50 of those, each an interpreter of its
  own, do not fit this machine beside 50 tables; the latency is the forwarder's and the
  floor's, not the GIL's);
  the tables are spread over ``--publishers`` processes and start staggered. The floor is
  ``shoewarden floor --nats … --db postgresql://…`` in a process of its own; for every
  alert, the time from the deviation record's ``ts`` (the table's writer, before its
  fsync) to the alert arriving at a client of the floor's ``/api/events``: p50, p99, max;
- **publish overhead on card latency** (target ≤ 0.1 ms p99 added, judged on what
  ``--publish`` runs: the forwarder as a child process of the table): the card latency of
  ``benchmarks/device_bench.py`` (simulator's last byte of a card frame on the pty → the
  card's record fsynced), measured without the forwarder, with it as ``--publish`` starts
  it (a child process), and with it as a thread of the table's process (the former design,
  printed for comparison), alternated in the same run (``--ab-rounds`` of each). It runs
  first, on a broker of its own and with PostgreSQL idle: run after the backlog and the
  alert latency, as it was, the servers' work after those put the arm without a
  forwarder's own p99 at 1.5–2.2 ms (0.6–0.7 ms on idle servers), and the overhead came
  out negative.

Usage: ``python benchmarks/floor_nats_bench.py [--tables N] [--live-tables N]
[--publishers N] [--pace S] [--cards N] [--ab-rounds N]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.servers: the private servers the tests use
sys.path.insert(0, str(Path(__file__).resolve().parent))

from floor_bench import Targets  # noqa: E402

from controller.audit import open_table_log  # noqa: E402
from controller.events import parse_event  # noqa: E402
from controller.profiles import load_profile  # noqa: E402
from controller.session import TableSession  # noqa: E402
from floor.core import Floor, parse_ts  # noqa: E402
from floor.forward import Connection, Forwarder, finish, forwarder_for_log  # noqa: E402
from floor.forward_process import forwarder_process_for_log  # noqa: E402
from floor.store import PostgresStore  # noqa: E402
from tests.servers import free_port, nats, postgres  # noqa: E402

MISTAKES = ROOT / "config" / "examples" / "gr-banco-punto-mistakes.jsonl"
TARGET_RATE = 50_000
TARGET_LATENCY_MS = 250.0
TARGET_ADDED_MS = 0.1


def pctl(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


# --------------------------------------------------------------------------- backlog


def backlog_from_files(day: Path, work: Path, url: str) -> tuple[int, float]:
    import floor_bench

    return floor_bench.catch_up(day, work, keep_records=True, store=PostgresStore(url))


def backlog_from_stream(day: Path, work: Path, url: str, nats_url: str, total: int
                        ) -> tuple[int, float, float]:
    """(records, seconds to drain, seconds the forwarder took to publish them)."""
    from floor.consume import NatsConsumer

    conn = Connection([nats_url])
    fwd = Forwarder([day], conn, stop_when_done=True)
    t0 = time.perf_counter()
    fwd.run()
    published = time.perf_counter() - t0
    if fwd.error is not None or fwd.published != total:
        raise SystemExit(f"floor NATS bench: the forwarder published {fwd.published} of "
                         f"{total} records ({fwd.error})")
    floor = Floor([], PostgresStore(url), audit_dir=work / "nats-floorlog",
                  files_on_disk=False, silent_after=float("inf"))
    consumer = NatsConsumer(floor, conn)
    t0 = time.perf_counter()
    consumer.start()
    deadline = time.monotonic() + 600
    while consumer.received < total and time.monotonic() < deadline:
        time.sleep(0.01)
    elapsed = time.perf_counter() - t0
    consumer.stop()
    stored = floor.store.stats()["records"]
    floor.store.close()
    if stored != total:
        raise SystemExit(f"floor NATS bench: {stored} of {total} records in PostgreSQL")
    return consumer.received, elapsed, published


def transport_floor(nats_url: str, total: int) -> tuple[int, float]:
    """The stream's own floor, measured on the same stream as ``backlog_from_stream``: the
    least a consumer of this design does per record, with nothing indexed — a durable
    consumer of its own (the floor's settings), pull requests of the floor's batch kept
    out as the floor keeps them, each message's ``Nats-Msg-Id`` read and the message
    acknowledged. No floor process can drain the stream faster than nats-py does this on
    the same machine. Returns (records, seconds)."""
    import asyncio

    import orjson
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    from floor.consume import ACK_WAIT, BATCH, record_id
    from floor.forward import AUDIT_SUBJECT, STREAM

    async def drain() -> tuple[int, float]:
        nc = await Connection([nats_url]).connect()
        js = nc.jetstream()
        durable = "bench-transport-floor"
        await js.add_consumer(STREAM, config=ConsumerConfig(
            name=durable, durable_name=durable, filter_subject=f"{AUDIT_SUBJECT}.>",
            ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL,
            ack_wait=ACK_WAIT, max_ack_pending=20_000))
        ready: list[Any] = []
        arrived = asyncio.Event()

        async def arrive(msg: Any) -> None:
            if msg.data:  # (a request's end is a status with no data)
                ready.append(msg)
                arrived.set()

        inbox = nc.new_inbox()
        await nc.subscribe(inbox, cb=arrive)
        request = orjson.dumps({"batch": BATCH, "expires": int(2e9)})
        subject = f"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{durable}"
        taken = asked = 0
        t0 = time.perf_counter()
        deadline = time.monotonic() + 600
        while taken < total:
            if time.monotonic() > deadline:
                raise SystemExit(f"floor NATS bench: the transport floor took {taken} of "
                                 f"{total} records in 600 s")
            if asked - taken < 2 * BATCH:  # two requests out, as the floor keeps them
                await nc.publish(subject, request, reply=inbox)
                asked += BATCH
            if not ready:
                arrived.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(arrived.wait(), 1.0)
                continue
            batch = ready[:]
            ready.clear()
            for msg in batch:
                if record_id(msg) is None:
                    raise SystemExit("floor NATS bench: a record without its table:file:seq")
                await msg.ack()
            taken += len(batch)
        elapsed = time.perf_counter() - t0
        await nc.close()
        return taken, elapsed

    return asyncio.run(drain())


# --------------------------------------------------------------------------- alert latency


def mistakes_day(n: int) -> list[Any]:
    """The first ``n`` events of the Banco Punto day with dealer mistakes."""
    lines = [line for line in MISTAKES.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [parse_event(json.loads(line)) for line in lines[:n]]


def alerts_in(events: list[Any]) -> int:
    """How many alerts the floor raises for these events (warning and critical
    deviations), by the real session."""
    with tempfile.TemporaryDirectory() as tmp:
        log = open_table_log(Path(tmp), "X", durability="none")
        session = TableSession(load_profile("gr-banco-punto"), log, {})
        session.start("X")
        for event in events:
            session.feed(event)
        session.close()
        return sum(1 for line in next(Path(tmp).glob("X/*.jsonl")).read_bytes().splitlines()
                   if b'"type":"deviation"' in line and (b'"severity":"warning"' in line
                                                        or b'"severity":"critical"' in line))


def publisher_child(spec: dict[str, Any]) -> None:
    """Lightweight tables in this process: each a thread feeding the mistakes day to the
    real session (its real log, fsync per input) and the real forwarder publishing it."""
    events = mistakes_day(spec["events"])
    profile = load_profile("gr-banco-punto")
    conn = Connection([spec["nats"]])
    root = Path(spec["root"])
    failures: list[str] = []

    def table(name: str, delay: float) -> None:
        time.sleep(delay)
        log = open_table_log(root / name, name, durability="input")  # its own machine's
        session = TableSession(profile, log, {"durability": "input"})
        session.start(name)
        fwd = forwarder_for_log(log.writer.name, conn)
        for event in events:
            session.feed(event)
            time.sleep(spec["pace"])
        session.close()
        line = finish(fwd, 30)
        if fwd.alive_after_stop():
            failures.append(f"{name}: {line}")

    threads = [threading.Thread(target=table, args=(name, delay))
               for name, delay in spec["tables"]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(failures), flush=True)


def alert_latency(n: int, publishers: int, pace: float, events: int, work: Path,
                  nats_url: str, db: str) -> tuple[list[float], list[str]]:
    port = free_port()
    floor_out = open(work / "floor.out", "w")  # noqa: SIM115 - closed with the run
    floor = subprocess.Popen(
        [sys.executable, "-m", "controller", "floor", "--nats", nats_url, "--db", db,
         "--http", f"127.0.0.1:{port}", "--log", str(work / "floorlog"),
         "--silent-after", "3600"], stdout=floor_out, stderr=subprocess.STDOUT)
    got: list[tuple[float, dict[str, Any]]] = []
    stop = threading.Event()
    ready = threading.Event()

    import floor_bench

    threading.Thread(target=floor_bench.listen_for_alerts,
                     args=(port, got, stop, ready, 200), daemon=True).start()
    if not ready.wait(30):
        floor.kill()
        raise SystemExit("floor NATS bench: the floor did not serve /api/events")
    played = mistakes_day(events)
    stagger = pace * len(played) / 2 / max(n, 1)  # starts spread over half a table's run
    names = [(f"S{i + 1:03d}", i * stagger) for i in range(n)]
    children = []
    for k in range(publishers):
        spec = {"nats": nats_url, "root": str(work / "live"), "pace": pace,
                "events": events, "tables": names[k::publishers]}
        if not spec["tables"]:
            continue
        child = subprocess.Popen([sys.executable, __file__, "--publisher-child"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert child.stdin is not None
        child.stdin.write(json.dumps(spec) + "\n")
        child.stdin.close()
        children.append(child)
    failures: list[str] = []
    for child in children:
        assert child.stdout is not None
        out = child.stdout.read().strip().splitlines()
        child.wait()
        failures += json.loads(out[-1]) if out else [f"a publisher exited {child.returncode}"]
    expected = alerts_in(played) * n
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    floor.terminate()
    try:
        floor.wait(15)
    except subprocess.TimeoutExpired:
        floor.kill()
    floor_out.close()
    latencies = []
    for received, alert in got:
        written = parse_ts(alert["ts"])
        if written is not None:
            latencies.append((received - written) * 1000)
    if len(got) != expected:
        failures.append(f"{len(got)} alerts of {expected} reached the page")
    return latencies, failures


# --------------------------------------------------------------------------- publish overhead


#: the A/B's arms: no forwarder; the forwarder as ``--publish`` runs it (a child process of
#: the table: ``forwarder_process_for_log``, ``shoewarden forward --until-eof``); the same
#: forwarder as a thread of the table's process (``forwarder_for_log``: the former design,
#: kept for comparison)
ARMS = ("off", "process", "thread")


#: seconds each arm of the publish A/B waits after its forwarder started, before the cards
SETTLE = 1.5


def verdict(targets: Targets, name: str, arm: str, added_ms: float) -> str:
    """The target is judged on what ``--publish`` runs (the process arm) only."""
    if arm != "process":
        return ""
    return (f" (target <= {TARGET_ADDED_MS} ms: "
            f"{targets.mark(name, added_ms <= TARGET_ADDED_MS)})")


def publish_overhead(work: Path, nats_url: str, cards: int, rounds: int
                     ) -> dict[str, tuple[list[float], list[float]]]:
    """Card latency (device_bench's measure) per arm, the arms alternated round by round.
    Per arm: the latencies, and the same without each card's own fsync (device_bench's
    software time: the disk's noise taken out, the CPU taken from the engine thread left
    in)."""
    import device_bench

    out: dict[str, tuple[list[float], list[float]]] = {arm: ([], []) for arm in ARMS}
    for i in range(rounds):
        for arm in ARMS:
            directory = work / f"ab-{arm}-{i}"
            directory.mkdir()
            table = f"AB-{arm}-{i}"  # a table of its own: the stream holds the others
            fwd: list[Any] = []

            def started(log_path: Path, arm: str = arm, into: list[Any] = fwd) -> None:
                if arm == "thread":
                    into.append(forwarder_for_log(log_path, Connection([nats_url])))
                elif arm == "process":
                    into.append(forwarder_process_for_log(log_path, Connection([nats_url]),
                                                          say=print))
                # the table's steady state, not its start: the child's interpreter starting
                # (~0.3 s of a core, once a day at a real table) is not a card's overhead;
                # every arm waits alike
                time.sleep(SETTLE)

            synced = len(device_bench.CARD_SYNC)
            latency, _ = device_bench.card_latency(directory, 1, cards, on_log=started,
                                                   table=table)
            syncs = device_bench.CARD_SYNC[synced:]
            if arm == "thread":
                finish(fwd[0], 30)
                ok = fwd[0].published > 0 and not fwd[0].alive_after_stop()
            elif arm == "process":
                fwd[0].finish(30)  # as run/bench do at their end
                ok = fwd[0].published > 0 and not fwd[0].alive_after_stop() \
                    and not fwd[0].exits
            else:
                ok = True
            if not ok:
                raise SystemExit(f"floor NATS bench: the {arm} forwarder did not publish")
            out[arm][0].extend(latency)
            out[arm][1].extend(lat - s for lat, s in zip(latency, syncs, strict=True))
    return out


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--publisher-child":
        publisher_child(json.loads(sys.stdin.readline()))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=60,
                        help="tables in the backlog day (default 60)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of the backlog from the files; the best is the figure "
                        "(default 3)")
    parser.add_argument("--live-tables", type=int, default=50,
                        help="simulated tables publishing at once (default 50)")
    parser.add_argument("--publishers", type=int, default=5,
                        help="processes the simulated tables are spread over (default 5)")
    parser.add_argument("--pace", type=float, default=0.1,
                        help="seconds between a simulated table's events (default 0.1)")
    parser.add_argument("--events", type=int, default=120,
                        help="events each simulated table deals: the first of the day with "
                        "mistakes, two deviations in its first 30 (default 120)")
    parser.add_argument("--cards", type=int, default=1000,
                        help="cards per arm and round of the publish A/B (default 1000)")
    parser.add_argument("--ab-rounds", type=int, default=4,
                        help="rounds of each arm of the publish A/B (default 4)")
    args = parser.parse_args(argv)
    import floor_bench

    code = 0
    targets = Targets()
    with tempfile.TemporaryDirectory(prefix="floor-nats-bench-") as tmp, \
            postgres() as pg, nats(Path(tmp)) as broker:
        work = Path(tmp)
        records = floor_bench.write_day(work / "day", args.tables)
        print(f"floor NATS/PostgreSQL: private nats-server -js and PostgreSQL (fsync off); "
              f"a day of {args.tables} tables, {records:,} records")
        # the publish A/B first, on a broker of its own (its tables stay out of the backlog
        # below) while PostgreSQL is idle: after the backlog and the alert run, the servers
        # go on working for a while, under the A/B (printed last, as before)
        (work / "ab-broker").mkdir()
        with nats(work / "ab-broker") as ab_broker:
            ab = publish_overhead(work, ab_broker.url, args.cards, args.ab_rounds)
        runs = [backlog_from_files(work / "day", work / f"files-{i}", pg.new_database())
                for i in range(args.repeat)]
        n, s = min(runs, key=lambda r: r[1])
        rate = n / s
        print(f"backlog into PostgreSQL from the log files (verify, fold, alerts, COPY "
              f"streamed, one commit a poll): {n:,} records in {s:.2f} s = {rate:,.0f} "
              f"records/s, the best of {len(runs)} (all: "
              f"{', '.join(f'{k / t:,.0f}' for k, t in runs)}; the machine is shared) "
              f"(target >= {TARGET_RATE:,}: "
              f"{targets.mark('backlog from the log files', rate >= TARGET_RATE)})")
        n2, s2, pub = backlog_from_stream(work / "day", work, pg.new_database(), broker.url,
                                          records)
        rate2 = n2 / s2
        n3, s3 = transport_floor(broker.url, records)
        rate3 = n3 / s3
        print(f"backlog into PostgreSQL from the stream (floor --nats: pull, verify, fold, "
              f"commit, then ack each): {n2:,} records in {s2:.2f} s = {rate2:,.0f} "
              f"records/s (target >= {TARGET_RATE:,}: "
              f"{targets.mark('backlog from the stream', rate2 >= TARGET_RATE)}); the "
              f"forwarder published them in {pub:.1f} s = {records / pub:,.0f} records/s")
        print(f"  the stream's own floor, same stream, same run (nats-py: pull, read each "
              f"Nats-Msg-Id, ack each; nothing checked or indexed): {n3:,} records in "
              f"{s3:.2f} s = {rate3:,.0f} records/s; the floor takes {rate3 / rate2:.2f}x its "
              f"time" + ("; the target is beyond the transport alone on this machine"
                          if rate3 < TARGET_RATE else ""))
        latencies, failures = alert_latency(args.live_tables, args.publishers, args.pace,
                                            args.events, work, broker.url, pg.new_database())
        if len(latencies) >= 2:
            p99 = pctl(latencies, 99)
            print(f"alert latency over NATS, {args.live_tables} simulated tables publishing "
                  f"(in {args.publishers} processes, an event every {args.pace:g} s each; "
                  f"{len(latencies)} alerts; deviation written at the table -> alert on the "
                  f"floor's event stream): p50 {statistics.median(latencies):.0f} ms, p99 "
                  f"{p99:.0f} ms, max {max(latencies):.0f} ms (target p99 <= "
                  f"{TARGET_LATENCY_MS:.0f} ms: "
                  f"{targets.mark('alert latency', p99 <= TARGET_LATENCY_MS)})"
                  + (f"; {'; '.join(failures)}" if failures else ""))
        else:
            print(f"alert latency over NATS: only {len(latencies)} alert(s) seen; "
                  f"{'; '.join(failures)}")
            code = 1
        (off, off_sw) = ab["off"]
        for arm, what in (("process", "with the forwarder as --publish runs it (a child "
                                      "process of the table)"),
                          ("thread", "with the forwarder a thread of the table's process "
                                     "(the former design, for comparison)")):
            on, on_sw = ab[arm]
            added = (pctl(on, 99) - pctl(off, 99)) * 1e3
            added_sw = (pctl(on_sw, 99) - pctl(off_sw, 99)) * 1e3
            print(f"card latency without / {what}: device_bench's measure, same run, "
                  f"{args.ab_rounds} alternations, {len(off)} / {len(on)} cards: p50 "
                  f"{statistics.median(off) * 1e3:.3f} / {statistics.median(on) * 1e3:.3f} "
                  f"ms, p99 {pctl(off, 99) * 1e3:.3f} / {pctl(on, 99) * 1e3:.3f} ms: adds "
                  f"{added:+.3f} ms at p99"
                  f"{verdict(targets, 'publish overhead', arm, added)}; without the card's own "
                  f"fsync (software time) p99 {pctl(off_sw, 99) * 1e3:.3f} / "
                  f"{pctl(on_sw, 99) * 1e3:.3f} ms: {added_sw:+.3f} ms"
                  f"{verdict(targets, 'publish overhead (software time)', arm, added_sw)}")
    if targets.missed:
        print(f"floor NATS: missed: {', '.join(targets.missed)}")
    return 1 if targets.missed else code


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
