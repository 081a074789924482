"""The database floor's consumer on a real nats-server and PostgreSQL: a floor whose first
try at the stream or its consumer fails (JetStream not ready yet on a server just started)
tries again, and then takes every record."""

from __future__ import annotations

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
        seq = int(line.split(b'"seq":', 1)[1].split(b",", 1)[0].rstrip(b"}"))
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
