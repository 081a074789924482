"""Several floor processes on one durable consumer (real nats-server and PostgreSQL): each
table's chain head comes from the database, so a floor that sees a table's record after
another floor committed the one before takes it on from there. Every record lands once, no
false chain alert, and every floor's live state and alerts are the whole floor's."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import psycopg
import pytest

from floor.consume import NatsConsumer
from floor.core import Floor
from floor.forward import Connection, Forwarder
from floor.store import PostgresStore
from tests.floor_helpers import table_log
from tests.nats_helpers import forward_once
from tests.servers import NatsServer, PostgresServer


def three_tables(logs: Path) -> list[Path]:
    return [table_log(logs, "BJ-01", "gr-blackjack", "gr-blackjack-day.jsonl"),
            table_log(logs, "PB-02"),  # a Banco Punto day with dealer mistakes: alerts
            table_log(logs, "RU-03", "gr-blackjack", "gr-blackjack-day.jsonl")]


def three_tables_written(logs: Path) -> list[Path]:
    return sorted(logs.glob("*/*.jsonl"))


def local(paths: list[Path]) -> dict[tuple[str, str, int], str]:
    out = {}
    for path in paths:
        for line in path.read_bytes().splitlines():
            rec = orjson.loads(line)
            out[(path.parent.name, path.name, rec["seq"])] = rec["hash"]
    return out


def rows(db: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(db) as conn:
        return conn.execute(sql).fetchall()


def wait_for(cond, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.slow  # (end to end: processes and servers started and killed)
def test_two_floors_on_one_consumer_take_three_tables_once_each_with_no_false_alert(
        nats_server: NatsServer, pg_server: PostgresServer, tmp_path: Path) -> None:
    paths = three_tables(tmp_path / "logs")
    want = local(paths)
    db = pg_server.new_database()
    floors = [Floor([], PostgresStore(db), audit_dir=tmp_path / f"floor{i}",
                    files_on_disk=False) for i in range(2)]
    # small batches: the two floors take turns through every table's records
    consumers = [NatsConsumer(f, Connection([nats_server.url]), batch=17) for f in floors]
    for c in consumers:
        c.start()
    try:
        fwd = Forwarder([tmp_path / "logs"], Connection([nats_server.url]),
                        stop_when_done=True)
        forward_once(fwd)
        assert fwd.error is None and fwd.published == len(want)
        wait_for(lambda: rows(db, "SELECT count(*) FROM audit_records")[0][0] >= len(want))
        last = {t: max(s for (tt, _, s) in want if tt == t) for t in ("BJ-01", "PB-02",
                                                                      "RU-03")}
        # every floor's live state is the whole floor's (taken in from the database)
        wait_for(lambda: all(t in f.tables and f.tables[t].state.last_seq == s
                             for f in floors for t, s in last.items()), 30)
        wait_for(lambda: all(len(f.alerts) == rows(db, "SELECT count(*) FROM alerts")[0][0]
                             for f in floors), 10)
    finally:
        for c in consumers:
            c.stop()
    got = rows(db, "SELECT table_id, file, seq, hash FROM audit_records")
    assert len(got) == len(want)
    assert {(t, f, s): h for t, f, s, h in got} == want  # all, once, the tables' hashes
    assert all(c.received > 0 for c in consumers), [c.received for c in consumers]
    assert sum(c.received for c in consumers) == len(want)
    assert rows(db, "SELECT message FROM alerts WHERE code IN ('CHAIN_BREAK', "
                "'LOG_REWRITTEN')") == []
    assert rows(db, "SELECT count(*) FROM alerts")[0][0] > 0  # PB-02's mistakes
    live = {t: (s, summary["table"]) for t, _, s, summary in floors[1].store.live_state()}
    assert live == {t: (s, t) for t, s in last.items()}  # the live state, in PostgreSQL
    for path in three_tables_written(tmp_path / "logs"):
        notes = [r["seq"] for r in map(orjson.loads, path.read_bytes().splitlines())
                 if r.get("kind") == "output" and r["output"].get("type") == "note"
                 and r["output"].get("kind") == "round"]
        ends = [e for _, _, _, _, e, _ in floors[0].store.rounds_of(path.parent.name)]
        assert ends == notes  # every round of the day, where its note is in the log
    for f in floors:  # each record folded once on every floor, whichever took it in
        for t in last:
            assert f.tables[t].state.records == sum(1 for k in want if k[0] == t)
        assert not [a for a in f.alerts.values() if a.code == "CHAIN_BREAK"]
        f.store.close()


def test_an_alert_acknowledged_on_one_floor_is_acknowledged_on_the_other(
        nats_server: NatsServer, pg_server: PostgresServer, tmp_path: Path) -> None:
    path = table_log(tmp_path / "logs")
    db = pg_server.new_database()
    floors = [Floor([], PostgresStore(db), audit_dir=tmp_path / f"floor{i}",
                    files_on_disk=False) for i in range(2)]
    consumer = NatsConsumer(floors[0], Connection([nats_server.url]))
    consumer.start()
    try:
        forward_once(Forwarder([tmp_path / "logs"], Connection([nats_server.url]),
                               stop_when_done=True))
        n = len(path.read_bytes().splitlines())
        wait_for(lambda: rows(db, "SELECT count(*) FROM audit_records")[0][0] >= n)
    finally:
        consumer.stop()
    other = floors[1]
    assert other.alerts == {} and other.tables == {}  # it consumed nothing, synced nothing

    from floor.rounds import lookup_rounds
    from floor.views import Disclosure

    def hand(f: Floor) -> list[dict[str, object]]:
        return lookup_rounds(f, "BP-01", day=None, shoe=None, round_="3",
                             disclosure=Disclosure.LIVE)

    assert hand(other) == hand(floors[0]) and hand(other)[0]["cards"]  # from PostgreSQL
    other.sync()
    assert other.tables["BP-01"].state.last_seq == floors[0].tables["BP-01"].state.last_seq
    alert = sorted(floors[0].alerts)[0]
    other.ack(alert, "pit boss", "seen on floor 2")
    import pytest

    from floor.core import AckError

    with pytest.raises(AckError) as refused:  # floor 1 learns it from the database
        floors[0].ack(alert, "someone else", "")
    assert refused.value.status == 409 and "pit boss" in str(refused.value)
    for f in floors:
        f.store.close()
