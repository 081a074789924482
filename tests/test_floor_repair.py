"""``shoewarden floor repair`` on the floor that follows log files, on both index backends
(SQLite, the embedded floor's; PostgreSQL on a private server): a broken file's true records
taken in from the table's log, and the floor following on from the new head. The same over
NATS, with a record forged into the stream: tests/test_floor_nats_tamper.py."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from controller.cli import main as cli_main
from floor.alerts import CHAIN_BREAK, CHAIN_REPAIRED, LOG_REWRITTEN
from floor.core import Floor
from floor.repair import RepairError, hold_name, repair_file
from floor.store import HeldError, open_store
from tests.floor_helpers import append, drain, table_log
from tests.test_audit_helpers import line_of, rotated_set


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The floor's index, as ``--db`` names it."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'floor.sqlite'}"
    else:
        yield request.getfixturevalue("pg_server").new_database()


def floor_on(db: str, logs: Path, work: Path) -> Floor:
    return Floor([logs], open_store(db), audit_dir=work / "floorlog")


def repair(db: str, logs: Path, work: Path, table: str, file: str,
           capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli_main(["floor", "repair", "--db", db, "--logs", str(logs), "--log",
                     str(work / "floorlog"), "--table", table, "--file", file, "--by",
                     "A. Auditor", "--note", "the true log restored from the table"])
    out = capsys.readouterr()
    return code, out.out + out.err


def edited(line: bytes, renumber: int = 0) -> bytes:
    """A record with its time changed (and its seq moved by ``renumber``), not re-sealed
    (an edit in place)."""
    rec = orjson.loads(line)
    return line_of(dict(rec, ts="2026-11-21T23:59:59.000Z", seq=rec["seq"] + renumber))


def indexed(db: str, table: str) -> list[tuple[str, int, str]]:
    store = open_store(db)
    try:
        return [(f, r["seq"], r["hash"]) for f, line in store.records(table)
                for r in [orjson.loads(line)]]
    finally:
        store.close()


def broken_at_201(db: str, tmp_path: Path) -> tuple[list[bytes], Path, Path, int]:
    """Table BP-01's log, its record 201 edited in place after the floor took 200: the
    true lines, the logs' root, the file there, and the acknowledged CHAIN_BREAK's id."""
    source = table_log(tmp_path / "source")
    lines = source.read_bytes().splitlines(keepends=True)
    logs = tmp_path / "logs"
    target = logs / "BP-01" / source.name
    target.parent.mkdir(parents=True)
    append(target, b"".join(lines[:200]))
    floor = floor_on(db, logs, tmp_path)
    assert drain(floor) == 200
    append(target, edited(lines[200]) + b"".join(lines[201:400]))
    drain(floor)
    (alert,) = [a for a in floor.alerts.values() if a.code == CHAIN_BREAK]
    assert alert.seq == 201
    floor.ack(alert.id, "P. Boss", "log edited on the table's disk")
    floor.stop()
    floor.store.close()
    return lines, logs, target, alert.id


def test_a_file_edited_in_place_is_repaired_from_the_true_log_and_followed_on(
        db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines, logs, target, alert_id = broken_at_201(db, tmp_path)

    # the edited log does not continue the floor's head: refused, nothing changed
    code, said = repair(db, logs, tmp_path, "BP-01", target.name, capsys)
    assert code == 1 and "line 201 (seq 201)" in said and "Traceback" not in said, said
    assert len(indexed(db, "BP-01")) == 200

    target.write_bytes(b"".join(lines[:400]))  # the table's true log, from its backup
    code, said = repair(db, logs, tmp_path, "BP-01", target.name, capsys)
    assert code == 0 and "200 record(s), seq 201 to 400" in said, said

    floor = floor_on(db, logs, tmp_path)  # a restart: from the repaired head on
    try:
        append(target, b"".join(lines[400:]))
        assert drain(floor) == len(lines) - 400
        assert [a.code for a in floor.alerts.values()].count(CHAIN_BREAK) == 1
        assert not any(a.code == LOG_REWRITTEN for a in floor.alerts.values())
        assert floor.alerts[alert_id].acked_by == "P. Boss"
        assert floor.table_summary("BP-01")["chain_ok"]
    finally:
        floor.stop()
        floor.store.close()
    assert indexed(db, "BP-01") == [(target.name, r["seq"], r["hash"])
                                    for r in map(orjson.loads, lines)]
    kinds = [orjson.loads(x)["kind"] for f in sorted((tmp_path / "floorlog" / "floor").glob(
        "*.jsonl")) for x in f.read_bytes().splitlines()]
    assert kinds.count("repair") == 1 and kinds.count("ack") == 1


def repairs_in(work: Path) -> int:
    """The ``repair`` records in the floor's own log under ``work``."""
    return sum(orjson.loads(x)["kind"] == "repair"
               for f in (work / "floorlog" / "floor").glob("*.jsonl")
               for x in f.read_bytes().splitlines())


def test_one_repair_of_a_file_at_a_time(db: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Two operators repairing one file (two machines on one index): the second is refused
    while the first runs, and a repair that read the index before the first committed
    finds the file changed; the records go in once and one repair is recorded."""
    lines, logs, target, _ = broken_at_201(db, tmp_path)
    target.write_bytes(b"".join(lines[:400]))  # the table's true log, from its backup
    name = target.name
    first, other = open_store(db), open_store(db)  # (two processes' connections)
    try:
        with first.hold(hold_name("BP-01", name)):  # another repair of it under way
            code, said = repair(db, logs, tmp_path / "second", "BP-01", name, capsys)
            assert code == 1 and "one repair of a file at a time" in said, said
            assert "Traceback" not in said
            with pytest.raises(HeldError, match="under way in another process"):
                other.hold(hold_name("BP-01", name)).__enter__()
            # another file's repair is not held up
            other_file = other.hold(hold_name("BP-01", "BP-01-2026-11-22.jsonl"))
            other_file.__enter__()
            other_file.__exit__(None, None, None)
    finally:
        first.close()
        other.close()
    assert len(indexed(db, "BP-01")) == 200 and repairs_in(tmp_path / "second") == 0

    late = open_store(db)  # a repair that read the index while the file was broken …
    stale = Floor([], late, audit_dir=tmp_path / "late" / "floorlog", files_on_disk=False,
                  tables=frozenset({"BP-01"}))
    try:
        code, said = repair(db, logs, tmp_path, "BP-01", name, capsys)  # … and one that
        assert code == 0, said  # commits first
        with pytest.raises(RepairError, match=r"nothing was changed|nothing to repair"):
            repair_file(stale, "BP-01", name, target, by="B. Auditor", note="")
    finally:
        stale.stop()
        late.close()
    assert [seq for _, seq, _ in indexed(db, "BP-01")] == list(range(1, 401))
    assert repairs_in(tmp_path) == 1 and repairs_in(tmp_path / "late") == 0


def test_an_older_file_is_repaired_while_the_table_is_on_its_next(
        db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    true = tmp_path / "table"
    days = rotated_set(true)  # three days of T1: three files, one chain
    logs = tmp_path / "logs"
    shutil.copytree(true, logs)
    middle = logs / "T1" / days[1].name
    lines = middle.read_bytes().splitlines(keepends=True)
    # (renumbered: the break's alert is not at the seq the repair starts from, where an
    # alert of the repair's making would go unseen)
    middle.write_bytes(b"".join([*lines[:-5], edited(lines[-5], 1000), *lines[-4:]]))
    floor = floor_on(db, logs, tmp_path)
    drain(floor)
    breaks = sorted((a.file, a.seq) for a in floor.alerts.values() if a.code == CHAIN_BREAK)
    floor.stop()
    floor.store.close()
    # the break, and the next day's file that does not continue the head the floor read
    newest = days[2].read_bytes().splitlines()
    assert breaks == [(days[1].name, orjson.loads(lines[-5])["seq"] + 1000),
                      (days[2].name, orjson.loads(newest[0])["seq"])]

    code, said = repair(db, true, tmp_path, "T1", days[1].name, capsys)
    assert code == 0, said
    assert indexed(db, "T1") == [(d.name, r["seq"], r["hash"]) for d in days
                                 for r in map(orjson.loads, d.read_bytes().splitlines())]
    floor = floor_on(db, true, tmp_path)
    try:  # the breaks stay; one alert of the repair, naming who did it; the table's live
        # state is its newest file's
        assert sorted((a.file, a.seq) for a in floor.alerts.values()
                      if a.code == CHAIN_BREAK) == breaks
        (fixed,) = [a for a in floor.alerts.values() if a.code == CHAIN_REPAIRED]
        assert (fixed.file, fixed.severity, fixed.is_open) == (days[1].name, "warning", True)
        assert fixed.seq == orjson.loads(lines[-1])["seq"] and "by " in fixed.message
        ((_, file, seq, _),) = floor.store.live_state("T1")
        assert (file, seq) == (days[2].name, orjson.loads(newest[-1])["seq"])
    finally:
        floor.stop()
        floor.store.close()


@pytest.mark.parametrize(("args", "message", "status"), [
    (["--file", "T1-2026-11-20.jsonl"], "the floor holds no file T1-2026-11-20.jsonl", 2),
    (["--file", "nonsense.txt"], "--file 'nonsense.txt': not a log file name of table T1", 2),
    (["--by", " "], "--by must name the person repairing", 2),
    (["--db", "mysql://floor"], "use sqlite:///PATH or postgresql://", 2),
    (["--db", ""], "floorlog/floor.sqlite (the default, under --log): give --db URL", 2),
    (["--db", "sqlite:///nowhere/floor.sqlite"], "no floor index at /nowhere/floor.sqlite", 2),
])
def test_bad_repair_arguments_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        args: list[str], message: str, status: int) -> None:
    days = rotated_set(tmp_path / "logs")
    open_store(f"sqlite:///{tmp_path / 'floor.sqlite'}").close()  # a floor's index, empty
    base = {"--db": f"sqlite:///{tmp_path / 'floor.sqlite'}", "--logs": str(tmp_path / "logs"),
            "--log": str(tmp_path / "floorlog"), "--table": "T1", "--file": days[1].name,
            "--by": "A. Auditor", "--note": "n"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    code = cli_main(["floor", "repair", *[x for kv in base.items() for x in kv]])
    err = capsys.readouterr().err
    assert code == status and message in err and "Traceback" not in err, err
