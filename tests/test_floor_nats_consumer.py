"""The database floor's consumer on a real nats-server and PostgreSQL: a floor whose first
try at the stream or its consumer fails (JetStream not ready yet on a server just started)
tries again, and then takes every record."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import floor.consume
from floor.consume import NatsConsumer
from floor.core import Floor
from floor.forward import Connection, Forwarder
from floor.store import PostgresStore
from tests.floor_helpers import table_log
from tests.nats_helpers import forward_once
from tests.servers import NatsServer, PostgresServer


def test_a_floor_whose_first_try_at_the_stream_fails_tries_again_and_takes_every_record(
        nats_server: NatsServer, pg_server: PostgresServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    path = table_log(tmp_path / "logs")
    n = len(path.read_bytes().splitlines())
    tries: list[int] = []
    real = floor.consume.ensure_stream

    async def not_ready_at_first(js: Any) -> None:
        tries.append(1)
        if len(tries) == 1:
            raise TimeoutError("JetStream not ready")
        await real(js)

    monkeypatch.setattr(floor.consume, "ensure_stream", not_ready_at_first)
    db = pg_server.new_database()
    consumer = NatsConsumer(Floor([], PostgresStore(db), audit_dir=tmp_path / "floorlog",
                                  files_on_disk=False), Connection([nats_server.url]))
    consumer.start()
    try:
        fwd = Forwarder([tmp_path / "logs"], Connection([nats_server.url]),
                        stop_when_done=True)
        forward_once(fwd)
        assert fwd.error is None and fwd.published == n
        deadline = time.monotonic() + 30
        while consumer.received < n:
            assert time.monotonic() < deadline, (consumer.received, n, consumer.failures)
            time.sleep(0.05)
    finally:
        consumer.stop()
    assert len(tries) >= 2 and consumer.failures >= 1
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM audit_records").fetchone() == (n,)


class _Msg:
    """What the consumer reads of a JetStream message: its id header, data, reply subject
    (the stream sequence) and the answers it sends."""

    def __init__(self, table: str, file: str, line: bytes, stream_seq: int) -> None:
        seq = json.loads(line)["seq"]  # (a file's first record names another seq first)
        self.headers = {"Nats-Msg-Id": f"{table}:{file}:{seq}"}
        self.data = line.rstrip(b"\n")
        self.subject = f"shoewarden.audit.{table}"
        self.reply = f"$JS.ACK.SHOEWARDEN.shoewarden-floor.1.{stream_seq}.{stream_seq}.0.0"
        self.answer = ""

    async def ack(self) -> None:
        self.answer = "ack"

    async def nak(self, delay: float | None = None) -> None:
        self.answer = "nak"

    async def term(self) -> None:
        self.answer = "term"

    async def in_progress(self) -> None:
        self.answer = "in progress"


def test_a_batch_of_tables_interleaved_record_by_record_is_one_run_per_file(
        tmp_path: Path) -> None:
    """Live, the tables' records reach the stream one by one, interleaved: the batch is
    checked and committed one run per file (one chain check, one position written), not one
    per record, every record in its file's order, each acknowledged after the commit."""
    import asyncio
    import itertools

    from tests.floor_helpers import sqlite_store

    logs = [table_log(tmp_path / "logs", table) for table in ("BP-01", "BP-02")]
    lines = [p.read_bytes().splitlines(keepends=True)[:40] for p in logs]
    order = [m for pair in itertools.zip_longest(*(
        [(p.parent.name, p.name, line) for line in ls] for p, ls in zip(logs, lines,
                                                                          strict=True)))
             for m in pair if m is not None]
    msgs = [_Msg(table, file, line, i + 1) for i, (table, file, line) in enumerate(order)]
    floor_ = Floor([], sqlite_store(tmp_path), audit_dir=tmp_path / "floorlog",
                   files_on_disk=False)
    runs: list[tuple[str, int, int]] = []
    ingest = floor_.ingest

    def counted(table: str, chunk: Any, **kw: Any) -> int:
        first = int(chunk.lines[0].split(b'"seq":', 1)[1].split(b",", 1)[0])
        runs.append((table, first, len(chunk.lines)))
        return ingest(table, chunk, **kw)

    floor_.ingest = counted  # type: ignore[method-assign]
    consumer = NatsConsumer(floor_, Connection(["nats://127.0.0.1:1"]))
    asyncio.run(consumer._take(list(reversed(msgs))))  # (taken in stream order)
    assert runs == [("BP-01", 1, 40), ("BP-02", 1, 40)]
    assert {m.answer for m in msgs} == {"ack"} and consumer.received == 80
    assert floor_.store.stats()["records"] == 80
    assert [p.seq for p in floor_.store.positions()] == [40, 40]


def test_a_record_delivered_twice_in_one_batch_is_taken_once(tmp_path: Path) -> None:
    """A killed floor's records come back after the ack wait; one may come twice in the
    batch a restarted floor gathers. Both copies went into the run, and the chain check said
    "seq N follows seq N: record repeated" — a CHAIN_BREAK on an intact table (a fresh
    clone's CI, test_a_floor_killed_mid_day_…). The second copy is a duplicate, acknowledged
    with the first once it is committed."""
    import asyncio

    from tests.floor_helpers import sqlite_store

    log = table_log(tmp_path / "logs", "BP-01")
    lines = log.read_bytes().splitlines(keepends=True)[:20]
    msgs = [_Msg("BP-01", log.name, line, i + 1) for i, line in enumerate(lines)]
    again = _Msg("BP-01", log.name, lines[9], 10)  # record 10, delivered a second time
    floor_ = Floor([], sqlite_store(tmp_path), audit_dir=tmp_path / "floorlog",
                   files_on_disk=False)
    consumer = NatsConsumer(floor_, Connection(["nats://127.0.0.1:1"]))
    asyncio.run(consumer._take([*msgs[:12], again, *msgs[12:]]))
    assert {m.answer for m in [*msgs, again]} == {"ack"}
    assert consumer.received == 20 and consumer.duplicates == 1
    assert floor_.store.stats()["records"] == 20
    assert not [a for a in floor_.alerts.values() if a.code == "CHAIN_BREAK"]


def _one_table(tmp_path: Path, n: int) -> tuple[Floor, NatsConsumer, list[_Msg]]:
    from tests.floor_helpers import sqlite_store

    log = table_log(tmp_path / "logs", "BP-01")
    lines = log.read_bytes().splitlines(keepends=True)[:n]
    msgs = [_Msg("BP-01", log.name, line, i + 1) for i, line in enumerate(lines)]
    floor_ = Floor([], sqlite_store(tmp_path), audit_dir=tmp_path / "floorlog",
                   files_on_disk=False)
    return floor_, NatsConsumer(floor_, Connection(["nats://127.0.0.1:1"])), msgs


def test_records_before_their_predecessor_are_parked_and_go_in_with_it(
        tmp_path: Path) -> None:
    """A restarted floor gets the records a killed floor had taken only after the ack wait,
    behind the records that follow them. Those are parked in the floor, unacknowledged —
    not sent back to the stream, where they came back in pieces, batch after batch (a
    2,000-record backlog took 25–55 s) — and go in, in order, with the batch that brings
    their predecessor; a parked record delivered again meanwhile is taken as delivered
    again."""
    import asyncio

    floor_, consumer, msgs = _one_table(tmp_path, 20)
    again = _Msg("BP-01", msgs[14].headers["Nats-Msg-Id"].split(":")[1],
                 msgs[14].data + b"\n", 15)  # record 15, its ack wait run out

    async def day() -> None:
        await consumer._take(msgs[10:])
        assert consumer.parked == 10 and consumer.held == 10 and consumer.received == 0
        assert {m.answer for m in msgs[10:]} == {""}  # neither acknowledged nor sent back
        await consumer._take([*msgs[:10], again])

    asyncio.run(day())
    assert consumer.parked == 0 and consumer.received == 20 and consumer.duplicates == 0
    assert [m.answer for m in msgs] == ["ack"] * 14 + [""] + ["ack"] * 5  # (15 came again)
    assert again.answer == "ack" and consumer.held == 10
    assert floor_.store.stats()["records"] == 20
    assert not [a for a in floor_.alerts.values() if a.code == "CHAIN_BREAK"]


def test_parked_records_are_kept_alive_sent_back_beyond_the_limit_and_when_stopping(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parked records have their ack wait restarted (JetStream's "in progress") so that they
    are not delivered again while they wait; beyond ``PARK_MAX`` the latest go back to the
    stream (the consumer stops delivering at its ``max_ack_pending``, and the record
    awaited must still come); a floor that stops sends back what it parked."""
    import asyncio

    monkeypatch.setattr(floor.consume, "PARK_MAX", 6)
    _, consumer, msgs = _one_table(tmp_path, 20)
    asyncio.run(consumer._take(msgs[10:]))
    assert consumer.parked == 6
    assert [m.answer for m in msgs[10:]] == [""] * 6 + ["nak"] * 4  # 17–20 sent back
    monkeypatch.setattr(floor.consume, "ACK_WAIT", 0)  # (every parked one is due)
    asyncio.run(consumer._keep_parked())
    assert [m.answer for m in msgs[10:16]] == ["in progress"] * 6
    asyncio.run(consumer._release_parked())
    assert [m.answer for m in msgs[10:16]] == ["nak"] * 6 and consumer.parked == 0


def test_a_shared_floor_waits_once_for_a_lost_predecessor_then_parks_the_tables_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a database shared by several floors a gap is first waited on (another floor may
    have the record in hand); when no floor commits it, it was lost with a killed floor:
    the table's later records are parked at once, not waited on batch after batch (a
    second each: a restarted floor's backlog crawled), and the table is waited on again
    once its records are in."""
    import asyncio

    monkeypatch.setattr(floor.consume, "WAIT_FOR_PREDECESSOR", 0.01)
    floor_, consumer, msgs = _one_table(tmp_path, 30)
    monkeypatch.setattr(floor_.store, "shared", True)
    waits: list[str] = []
    real = consumer._await_progress

    async def counted(table: str) -> bool:
        waits.append(table)
        return await real(table)

    monkeypatch.setattr(consumer, "_await_progress", counted)

    async def day() -> None:
        await consumer._take(msgs[10:15])
        assert waits == ["BP-01"] and consumer.parked == 5
        await consumer._take(msgs[15:20])  # stalled: parked without a wait
        assert waits == ["BP-01"] and consumer.parked == 10
        await consumer._take(msgs[:10])  # the lost ones: all in, the table not stalled
        assert consumer.parked == 0 and consumer.received == 20
        await consumer._take(msgs[25:])
        assert waits == ["BP-01", "BP-01"]

    asyncio.run(day())
    assert {m.answer for m in msgs[:20]} == {"ack"}


def _two_days(root: Path) -> list[_Msg]:
    """RU-03's log over two days (10 records, then 5 in the next day's file, which continues
    the first: its seqs go on from 11), as the stream delivers them."""
    import datetime as dt

    from controller.audit.files import open_table_log

    for date, records in ((dt.date(2026, 11, 20), 10), (dt.date(2026, 11, 21), 5)):
        with open_table_log(root, "RU-03", date, clock=lambda d=date: dt.datetime.combine(
                d, dt.time(10), tzinfo=dt.UTC)) as log:
            for i in range(records):
                log.write("note", {"table": "RU-03", "state": "closed", "shoe": 1, "round": i},
                          text=f"step {i}")
    files = sorted((root / "RU-03").glob("*.jsonl"))
    lines = [(path.name, line) for path in files for line in path.read_bytes().splitlines(True)]
    return [_Msg("RU-03", name, line, n) for n, (name, line) in enumerate(lines, 1)]


def test_a_days_next_file_is_taken_in_from_the_stream(tmp_path: Path) -> None:
    """A table's log goes on in the next day's file, its first record naming the seq it
    continues (seq 11 after 10). The consumer read a file it had not begun as starting at
    seq 1: the next file's records were held back for ever (nak'ed, later parked) — a
    table open two days reached the floor over NATS only for the first."""
    import asyncio

    from tests.floor_helpers import sqlite_store

    msgs = _two_days(tmp_path / "logs")
    floor_ = Floor([], sqlite_store(tmp_path), audit_dir=tmp_path / "floorlog",
                   files_on_disk=False)
    consumer = NatsConsumer(floor_, Connection(["nats://127.0.0.1:1"]))
    asyncio.run(consumer._take(msgs[:12]))
    asyncio.run(consumer._take(msgs[12:]))
    assert [m.answer for m in msgs] == ["ack"] * 15 and consumer.parked == 0
    assert sorted((p.file[-16:], p.seq) for p in floor_.store.positions()) == [
        ("2026-11-20.jsonl", 10), ("2026-11-21.jsonl", 15)]
    assert not [a for a in floor_.alerts.values() if a.code == "CHAIN_BREAK"]


def _two_floors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                ) -> tuple[list[Floor], NatsConsumer, NatsConsumer]:
    """Two floors on one database (as on PostgreSQL: ``shared``), each with its consumer;
    a gap waited on for 10 ms."""
    from tests.floor_helpers import sqlite_store

    monkeypatch.setattr(floor.consume, "WAIT_FOR_PREDECESSOR", 0.01)
    floors = [Floor([], sqlite_store(tmp_path), audit_dir=tmp_path / f"floor{i}",
                    files_on_disk=False) for i in range(2)]
    for f in floors:
        monkeypatch.setattr(f.store, "shared", True)
    mine, other = (NatsConsumer(f, Connection(["nats://127.0.0.1:1"])) for f in floors)
    return floors, mine, other


def test_a_file_parked_behind_the_one_it_continues_goes_in_when_that_one_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two floors on one database: this one has parked the end of a day's file (its
    beginning went to the other floor, killed or slow) and then gets the next day's file,
    which continues it. In the pass that takes the next file in, the first goes in too —
    the other floor has committed its beginning — after the next was looked at: the next
    goes in in the same batch, not when some later record happens to come."""
    import asyncio


    msgs = _two_days(tmp_path / "logs")
    floors, mine, other = _two_floors(tmp_path, monkeypatch)

    async def day() -> None:
        await mine._take(msgs[5:10])  # the first file's end: its beginning is elsewhere
        assert mine.parked == 5
        await other._take(msgs[:5])  # the other floor commits the beginning
        await mine._take(msgs[10:])  # the next file: parked, then in once the first is
        assert mine.parked == 0 and mine.received == 10

    asyncio.run(day())
    assert {m.answer for m in msgs} == {"ack"}
    assert floors[0].store.stats()["records"] == 15
    assert not [a for f in floors for a in f.alerts.values() if a.code == "CHAIN_BREAK"]


def test_a_file_that_continues_a_broken_one_goes_in_as_the_file_floor_takes_it(
        tmp_path: Path) -> None:
    """A day's file whose chain breaks (a record edited): the next day's file, which
    continues it, waited for the broken file's head to reach the seq it names — for ever,
    its records held back (nak'ed, later parked) until the consumer stopped getting new
    records at all. It goes in now, and the floor says what the file floor says of the
    same files."""
    import asyncio

    from tests.floor_helpers import drain, open_floor, sqlite_store

    root = tmp_path / "logs"
    msgs = _two_days(root)
    first = sorted((root / "RU-03").glob("*.jsonl"))[0]
    lines = first.read_bytes().splitlines(True)
    lines[4] = lines[4].replace(b"step 4", b"step 9")  # edited, its hash not
    first.write_bytes(b"".join(lines))
    msgs[4].data = lines[4].rstrip(b"\n")
    files = open_floor([root], tmp_path / "file-floor")
    drain(files)
    floor_ = Floor([], sqlite_store(tmp_path), audit_dir=tmp_path / "floorlog",
                   files_on_disk=False)
    consumer = NatsConsumer(floor_, Connection(["nats://127.0.0.1:1"]))
    asyncio.run(consumer._take(msgs))
    assert consumer.parked == 0 and {m.answer for m in msgs} == {"ack"}

    def alerts(f: Floor) -> list[tuple[str, str, int]]:
        return sorted((a.code, a.file[-16:], a.seq) for a in f.alerts.values())

    assert alerts(floor_) == alerts(files)
    assert ("CHAIN_BREAK", "2026-11-20.jsonl", 5) in alerts(floor_)


def test_a_next_day_waits_for_the_day_it_continues_in_another_floors_hands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two floors on one database: one gets a table's first day, the other its next day
    first (the first floor's commit is not in yet). Taken at once, the next day went in
    as the table's chain, and the first day, committed after it, was two critical
    CHAIN_BREAKs on a healthy table (a review). The next day waits for the day it
    continues and goes in once the other floor has committed it; and a day whose
    predecessor never comes goes in after ORPHAN_WAIT, judged by the chain check."""
    import asyncio

    from tests.floor_helpers import sqlite_store

    msgs = _two_days(tmp_path / "logs")
    floors, mine, other = _two_floors(tmp_path, monkeypatch)

    async def day() -> None:
        await mine._take(msgs[10:])  # the next day, before the first is committed
        assert mine.parked == 5 and mine.received == 0
        await other._take(msgs[:10])
        await mine._retry_parked()  # (what the consumer's loop does while none comes)
        assert mine.parked == 0 and mine.received == 5

    asyncio.run(day())
    assert {m.answer for m in msgs} == {"ack"}
    assert not [a for f in floors for a in f.alerts.values()]

    alone = Floor([], sqlite_store(tmp_path / "alone"), audit_dir=tmp_path / "floor3",
                  files_on_disk=False)
    lone = NatsConsumer(alone, Connection(["nats://127.0.0.1:1"]))
    again = _two_days(tmp_path / "again")[10:]  # the day before it never comes
    asyncio.run(lone._take(again))
    assert lone.parked == 5
    monkeypatch.setattr(floor.consume, "ORPHAN_WAIT", 0)
    asyncio.run(lone._retry_parked())
    assert lone.parked == 0 and lone.received == 5 and {m.answer for m in again} == {"ack"}
