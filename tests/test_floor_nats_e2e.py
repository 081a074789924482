"""End to end on real servers: benches publish their days over NATS JetStream while the
broker is killed with SIGKILL and restarted; the database floor consumes the stream into
PostgreSQL. Afterwards PostgreSQL holds every record of every table exactly once, with the
hashes of the tables' local logs."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import orjson
import psycopg
import pytest

from floor.consume import NatsConsumer
from floor.core import Floor
from floor.forward import Connection
from floor.store import PostgresStore
from tests.floor_helpers import ROOT
from tests.servers import NatsServer, PostgresServer

TABLES = {"BJ-01": "gr-blackjack", "PB-02": "gr-banco-punto", "RU-03": "ru-blackjack"}


def local_records(logs: Path) -> dict[tuple[str, str, int], str]:
    out = {}
    for table in TABLES:
        for path in sorted((logs / table).glob("*.jsonl")):
            for line in path.read_bytes().splitlines():
                rec = orjson.loads(line)
                out[(table, path.name, rec["seq"])] = rec["hash"]
    return out


def database_records(url: str) -> list[tuple[str, str, int, str]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT table_id, file, seq, hash FROM audit_records").fetchall()


def bench(table: str, logs: Path, url: str, seed: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "controller", "bench", "--profile", TABLES[table], "--shoes",
         "1", "--seed", str(seed), "--pace", "0.008", "--log", str(logs), "--table", table,
         "--publish", url, "--no-progress"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_three_tables_through_a_broker_killed_mid_day_land_once_each_in_postgres(
        nats_server: NatsServer, pg_server: PostgresServer, tmp_path: Path) -> None:
    db = pg_server.new_database()
    floor = Floor([], PostgresStore(db), audit_dir=tmp_path / "floorlog",
                  files_on_disk=False)
    consumer = NatsConsumer(floor, Connection([nats_server.url]))
    consumer.start()
    logs = tmp_path / "logs"
    benches = [bench(t, logs, nats_server.url, 11 + i) for i, t in enumerate(TABLES)]
    try:
        time.sleep(1.5)
        assert all(b.poll() is None for b in benches)
        nats_server.kill()  # mid-day: the tables deal on, their forwarders retry
        time.sleep(2.5)
        nats_server.start()
        results = [b.communicate(timeout=240) for b in benches]
        for b, (out, err) in zip(benches, results, strict=True):
            assert b.returncode == 0, out + err  # every table finished its day cleanly
            assert "published" in out and "did not take the rest" not in out
        want = local_records(logs)
        deadline = time.monotonic() + 60
        while len(database_records(db)) < len(want) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        consumer.stop()
        floor.store.close()
    rows = database_records(db)
    assert len(rows) == len(set((t, f, s) for t, f, s, _ in rows))
    assert {(t, f, s): h for t, f, s, h in rows} == want  # all, once, the tables' hashes
    assert not [a for a in floor.alerts.values() if a.code in ("CHAIN_BREAK",)]


def floor_process(nats_url: str, db: str, work: Path) -> subprocess.Popen[str]:
    from tests.servers import free_port

    return subprocess.Popen(
        [sys.executable, "-m", "controller", "floor", "--nats", nats_url, "--db", db,
         "--log", str(work / "floorlog"), "--http", f"127.0.0.1:{free_port()}"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_a_floor_killed_mid_day_and_restarted_loses_nothing_and_doubles_nothing(
        nats_server: NatsServer, pg_server: PostgresServer, tmp_path: Path) -> None:
    db = pg_server.new_database()
    logs = tmp_path / "logs"
    first = floor_process(nats_server.url, db, tmp_path)
    second: subprocess.Popen[str] | None = None
    benches = [bench(t, logs, nats_server.url, 21 + i) for i, t in enumerate(TABLES)]
    try:
        deadline = time.monotonic() + 30
        while not (_ready(db) and database_records(db)):
            assert time.monotonic() < deadline, "the floor took nothing in"
            time.sleep(0.1)
        first.kill()  # SIGKILL: a batch may be committed but not acknowledged
        first.wait()
        assert all(b.poll() is None for b in benches)
        for b in benches:
            out, err = b.communicate(timeout=240)
            assert b.returncode == 0, out + err
        second = floor_process(nats_server.url, db, tmp_path)
        want = local_records(logs)
        deadline = time.monotonic() + 60
        while len(database_records(db)) < len(want) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        for p in (first, *benches, second):
            if p is not None and p.poll() is None:
                p.kill()
    rows = database_records(db)
    assert {(t, f, s): h for t, f, s, h in rows} == want and len(rows) == len(want)
    with psycopg.connect(db) as conn:  # the killed floor's batch came back in order
        assert conn.execute("SELECT message FROM alerts WHERE code = 'CHAIN_BREAK'"
                            ).fetchall() == []


def _ready(db: str) -> bool:
    """The floor applied its migrations (audit_records exists)."""
    with psycopg.connect(db) as conn:
        return conn.execute("SELECT to_regclass('audit_records')").fetchone() != (None,)
