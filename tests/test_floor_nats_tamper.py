"""A record altered on the wire, or forged into the stream with a valid message id, is
refused by the database floor with a chain alert, and PostgreSQL keeps the table's true
chain (real nats-server and PostgreSQL)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import orjson
import psycopg
import pytest

from floor.consume import NatsConsumer
from floor.core import Floor
from floor.forward import STREAM, Connection, Forwarder, audit_subject, msg_id
from floor.store import PostgresStore
from tests.floor_helpers import append, table_log
from tests.nats_helpers import stream_messages
from tests.servers import NatsServer, PostgresServer


def altered_card(lines: list[bytes], cut: int) -> bytes:
    """The table's next record with its card changed, its hash kept (an edit on the wire)."""
    rec = orjson.loads(lines[cut])
    assert rec["seq"] == cut + 1 and rec["event"]["type"] == "card"
    rec["event"]["card"] = "AS" if rec["event"]["card"] != "AS" else "KD"
    return orjson.dumps(rec, option=orjson.OPT_SORT_KEYS)


def inserted(lines: list[bytes], cut: int) -> bytes:
    """A record the table never wrote: its previous record again, numbered as the next and
    linked to it (a replay forged into the stream)."""
    prev = orjson.loads(lines[cut - 1])
    rec = dict(prev, seq=cut + 1, prev=prev["hash"])
    return orjson.dumps(rec, option=orjson.OPT_SORT_KEYS)


def card_cut(lines: list[bytes]) -> int:
    """Where the table stands when the forgery goes out: the records before a card, some
    way into the day (the altered-card forgery needs a card next)."""
    for i, line in enumerate(lines):
        rec = orjson.loads(line)
        if i >= 150 and rec.get("kind") == "input" and rec["event"].get("type") == "card":
            return i
    raise AssertionError("no card in the day")


def forge(url: str, table: str, file: str, seq: int, data: bytes) -> None:
    async def go() -> None:
        import nats

        nc = await nats.connect(url)
        try:  # no expected-last check: a forger does not play by the table's rules
            await nc.jetstream().publish(audit_subject(table), data, stream=STREAM,
                                         headers={"Nats-Msg-Id": msg_id(table, file, seq)})
        finally:
            await nc.close()

    asyncio.run(go())


def wait_for(cond, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.parametrize("forgery", [altered_card, inserted])
def test_a_forged_record_with_a_valid_message_id_is_refused_and_the_true_chain_kept(
        forgery, nats_server: NatsServer, pg_server: PostgresServer,  # type: ignore[no-untyped-def]
        tmp_path: Path) -> None:
    source = table_log(tmp_path / "source")
    lines = source.read_bytes().splitlines(keepends=True)
    cut = card_cut(lines)  # the table has written this many records when the forgery comes
    target = tmp_path / "logs" / "BP-01" / source.name
    target.parent.mkdir(parents=True)
    append(target, b"".join(lines[:cut]))
    db = pg_server.new_database()
    floor = Floor([], PostgresStore(db), audit_dir=tmp_path / "floorlog", files_on_disk=False)
    consumer = NatsConsumer(floor, Connection([nats_server.url]))
    consumer.start()
    fwd = Forwarder([tmp_path / "logs"], Connection([nats_server.url]))
    fwd.start()
    try:
        wait_for(lambda: len(stream_messages(nats_server.url)) == cut)
        forged = forgery(lines, cut)
        forge(nats_server.url, "BP-01", source.name, cut + 1, forged)  # ahead of the table
        append(target, b"".join(lines[cut:]))
        wait_for(lambda: fwd.cursors["BP-01"].seq == len(lines))
        wait_for(lambda: any(a.code == "CHAIN_BREAK" for a in floor.alerts.values()))
        time.sleep(1)  # what comes after the forgery has had its chance to go in
    finally:
        fwd.stop()
        consumer.stop()
        floor.store.close()
    assert fwd.duplicates == 1  # the true record was taken for a resend: the stream has the
    wire = [data for _, _, data in stream_messages(nats_server.url)]  # forgery in its place
    assert wire[cut] == forged and len(wire) == len(lines)
    with psycopg.connect(db) as conn:
        got = conn.execute("SELECT seq, hash, record::text FROM audit_records "
                           "ORDER BY seq").fetchall()
        breaks = conn.execute("SELECT seq, message FROM alerts WHERE code = 'CHAIN_BREAK'"
                              ).fetchall()
        head = conn.execute("SELECT seq, hash, broken FROM log_files").fetchall()
    true = [orjson.loads(x) for x in lines[:cut]]
    assert [(s, h) for s, h, _ in got] == [(r["seq"], r["hash"]) for r in true]
    assert [orjson.loads(t) for _, _, t in got] == true  # the table's records, unaltered
    assert [s for s, _ in breaks] == [cut + 1] and "BP-01" in breaks[0][1]
    assert head[0][:2] == (cut, true[-1]["hash"]) and head[0][2]  # the break is recorded
