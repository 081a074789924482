"""The floor's index backends: versioned migrations, the issue's PostgreSQL schema, a rerun
of a run of records neither doubles nor changes it."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from pytest_mock import MockerFixture

from floor.alerts import AlertDraft
from floor.store import (
    FilePosition,
    FloorStore,
    PostgresStore,
    RunCommit,
    migrations,
    open_store,
)
from tests.servers import PostgresServer


def test_postgres_migrations_apply_once_in_order_and_keep_the_issues_schema(
        pg_server: PostgresServer) -> None:
    url = pg_server.new_database()
    steps = migrations("postgresql")
    assert [m.version for m in steps] == sorted(m.version for m in steps) and steps
    first = PostgresStore(url)
    assert first.schema_version() == steps[-1].version
    first.close()
    again = open_store(url)  # a second floor starting: nothing applied twice
    assert isinstance(again, PostgresStore) and again.schema_version() == steps[-1].version
    again.close()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM schema_version").fetchone() == (len(steps),)
        cols = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = 'audit_records' ORDER BY ordinal_position").fetchall()
        key = conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'audit_records'::regclass "
            "AND i.indisprimary").fetchall()
    assert cols == [("table_id", "text"), ("seq", "bigint"), ("file", "text"),
                    ("hash", "text"), ("record", "jsonb")]
    assert sorted(k for (k,) in key) == ["file", "seq", "table_id"]


def test_sqlite_index_records_its_schema_version(tmp_path: Path) -> None:
    store = FloorStore(str(tmp_path / "floor.sqlite"))
    assert store.schema_version() == migrations("sqlite")[-1].version
    store.close()
    assert FloorStore(str(tmp_path / "floor.sqlite")).schema_version() == \
        migrations("sqlite")[-1].version


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_run_committed_twice_is_stored_once_and_the_first_version_stays(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = (f"sqlite:///{tmp_path / 'f.sqlite'}" if backend == "sqlite"
           else request.getfixturevalue("pg_server").new_database())
    store = open_store(url)
    pos = FilePosition("BJ-01", "BJ-01-2026-11-21.jsonl", "/x", 10, 2, "h2", "", None)
    rows = [(1, "h1", b'{"seq":1,"hash":"h1"}'), (2, "h2", b'{"seq":2,"hash":"h2"}')]
    draft = AlertDraft("BJ-01", pos.file, 2, "X", "warning", "m", "r", "t")
    assert len(store.commit_run(pos, rows, [draft])) == 1
    forged = [(2, "hX", b'{"seq":2,"hash":"hX"}')]
    assert store.commit_run(pos, forged, [draft]) == []  # a redelivery: nothing new
    assert store.stats()["records"] == 2
    lines = [line for _, line in store.records("BJ-01")]
    assert [b"h2" in line for line in lines] == [False, True] and b"hX" not in lines[1]
    assert [p.offset for p in store.positions()] == [10]
    store.close()


def _count(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM audit_records").fetchone()
    assert row is not None
    return int(row[0])


def test_runs_sent_ahead_are_invisible_until_their_group_commits_and_a_stored_row_stays(
        pg_server: PostgresServer) -> None:
    url = pg_server.new_database()
    store = PostgresStore(url)
    day = "BJ-01-2026-11-21.jsonl"
    store.commit_run(FilePosition("BJ-01", day, "/x", 10, 2, "h2", "", None),
                     [(1, "h1", b'{"seq":1,"hash":"h1"}'), (2, "h2", b'{"seq":2,"hash":"h2"}')],
                     [])
    # a backslash, an escaped quote, a \u escape and a non-ASCII letter: the COPY's text
    # format must carry the line's bytes as they are
    odd = rb'{"hash":"g1","note":"a\\b \"q\" \u00e9 \xc3\xa9","seq":1}'.replace(
        rb"\xc3\xa9", "é".encode())
    other = RunCommit(FilePosition("PB-02", "PB-02-2026-11-21.jsonl", "/y", 5, 1, "g1", "",
                                   None), [(1, "g1", odd)], [])
    again = RunCommit(FilePosition("BJ-01", day, "/x", 20, 3, "h3", "", None),
                      [(2, "hX", b'{"seq":2,"hash":"hX"}'), (3, "h3", b'{"seq":3,"hash":"h3"}')],
                      [AlertDraft("BJ-01", day, 3, "X", "warning", "m", "r", "t")])
    store.stage(other)
    store.stage(again)
    assert _count(url) == 2  # sent, not committed: no other connection sees them
    made = store.commit_runs([other, again])
    assert [len(m) for m in made] == [0, 1]
    assert _count(url) == 4
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT seq, hash FROM audit_records WHERE table_id = 'BJ-01' "
                            "ORDER BY seq").fetchall()
        note = conn.execute("SELECT record->>'note' FROM audit_records "
                            "WHERE table_id = 'PB-02'").fetchone()
    assert rows == [(1, "h1"), (2, "h2"), (3, "h3")]
    assert note == ('a\\b "q" é é',)
    assert {p.file: p.offset for p in store.positions()} == {day: 20,
                                                             "PB-02-2026-11-21.jsonl": 5}
    store.close()


def test_a_group_that_fails_leaves_nothing_and_the_next_one_goes_in(
        pg_server: PostgresServer) -> None:
    url = pg_server.new_database()
    store = PostgresStore(url)
    day = "BJ-01-2026-11-21.jsonl"
    good = RunCommit(FilePosition("BJ-01", day, "/x", 10, 1, "h1", "", None),
                     [(1, "h1", b'{"seq":1,"hash":"h1"}')], [])
    bad = RunCommit(FilePosition("BJ-01", day, None, 20, 2, "h2", "", None),  # type: ignore[arg-type]
                    [(2, "h2", b'{"seq":2,"hash":"h2"}')], [])  # path NOT NULL: refused
    store.stage(good)
    store.stage(bad)
    with pytest.raises(psycopg.errors.NotNullViolation):
        store.commit_runs([good, bad])
    assert _count(url) == 0 and store.positions() == []
    store.stage(good)
    store.commit_runs([good])
    assert _count(url) == 1 and [p.seq for p in store.positions()] == [1]
    store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_live_state_of_several_tables_is_saved_at_once_as_each_alone(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest,
        mocker: MockerFixture) -> None:
    """A commit's live rows go in one call (PostgreSQL: one pipeline, one round trip):
    what is stored is what one call per row stored — the newest file's state last, every
    round touched, a round once ended staying ended."""
    url = (f"sqlite:///{tmp_path / 'f.sqlite'}" if backend == "sqlite"
           else request.getfixturevalue("pg_server").new_database())
    store = open_store(url)
    old, new = "BJ-01-2026-11-21.jsonl", "BJ-01-2026-11-22.jsonl"
    store.save_live("PB-02", "PB-02-2026-11-22.jsonl", 3, "t0", b'{"n":0}',
                    [(1, 1, 2, 9, "t0", "Banco 7")])  # an earlier commit: round 1 ended
    if backend == "postgresql":
        pipelines = mocker.spy(type(store.db), "pipeline")
    store.save_lives([
        ("BJ-01", old, 40, "t1", b'{"n":1}', [(2, 7, 30, 35, "t1", "dealer 19")]),
        ("BJ-01", new, 40, "t1", b'{"n":1}', [(1, 1, 3, None, "t1", None)]),
        ("PB-02", "PB-02-2026-11-22.jsonl", 12, "t2", b'{"n":2}',
         [(1, 1, 2, None, "t2", None), (1, 2, 10, None, "t2", None)]),
    ])
    if backend == "postgresql":
        assert pipelines.call_count == 1
    assert [(t, f, s, j) for t, f, s, j in store.live_state()] == [
        ("BJ-01", new, 40, {"n": 1}), ("PB-02", "PB-02-2026-11-22.jsonl", 12, {"n": 2})]
    assert store.rounds_of("BJ-01") == [(old, 2, 7, 30, 35, "dealer 19"),
                                        (new, 1, 1, 3, None, None)]
    assert store.rounds_of("PB-02") == [("PB-02-2026-11-22.jsonl", 1, 1, 2, 9, "Banco 7"),
                                        ("PB-02-2026-11-22.jsonl", 1, 2, 10, None, None)]
    store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_tables_live_state_never_goes_back_to_an_earlier_file(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Two floors save a table's live state after their commits, in any order. The state
    was kept when the seq was not lower *or the file differed*: a floor's late save of a
    commit that spanned two days (the first day's row, then the second's at seq 20) put
    back another floor's (day 2, seq 36) — a review. Files are ordered by date and part:
    an earlier file never replaces a later one; a later one does, a new chain's seq 1
    too."""
    url = (f"sqlite:///{tmp_path / 'f.sqlite'}" if backend == "sqlite"
           else request.getfixturevalue("pg_server").new_database())
    store = open_store(url)
    day1, day2, part2 = ("RU-03-2026-11-20.jsonl", "RU-03-2026-11-21.jsonl",
                         "RU-03-2026-11-21.2.jsonl")

    def save(file: str, seq: int) -> list[tuple[str, int]]:
        store.save_lives([("RU-03", file, seq, None, b'{"table":"RU-03"}', [])])
        return [(f, s) for _, f, s, _ in store.live_state()]

    assert save(day2, 36) == [(day2, 36)]
    assert save(day1, 20) == [(day2, 36)]  # the late save of a commit over two days
    assert save(day2, 20) == [(day2, 36)]
    assert save(day2, 40) == [(day2, 40)]
    assert save(part2, 1) == [(part2, 1)]  # the same day's second file: a new chain
    assert save(day2, 41) == [(part2, 1)]
    store.close()
