"""The floor's core: following logs as they grow, the chain check, alerts, acks, restarts.

Every test runs on each index backend (python-can style: the same tests, several
backends): SQLite, the one-machine floor's, and PostgreSQL, the database floor's, on a
private server (tests/servers.py).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from pytest_mock import MockerFixture

import floor.core
from controller.audit import open_table_log, verify_set
from controller.audit.files import table_files
from floor.alerts import CHAIN_BREAK, CHAIN_NEW, LOG_REWRITTEN, TABLE_SILENT
from floor.core import AckError, parse_ts
from floor.store import FloorStore, PostgresStore, SqlIndex
from tests import floor_helpers
from tests.floor_helpers import append, deviations_in, drain, grow, open_floor, table_log


@pytest.fixture(autouse=True, params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test once per backend: ``open_floor(roots, work)`` opens that backend's index
    (one database per ``work``, so reopening it is a restart)."""
    if request.param == "sqlite":
        def store(work: Path) -> SqlIndex:
            return FloorStore(str(work / "floor.sqlite"))
    else:
        server = request.getfixturevalue("pg_server")
        databases: dict[Path, str] = {}

        def store(work: Path) -> SqlIndex:
            if work not in databases:
                databases[work] = server.new_database()
            return PostgresStore(databases[work])
    floor_helpers.STORE_FOR[0] = store
    try:
        yield request.param
    finally:
        floor_helpers.STORE_FOR[0] = floor_helpers.sqlite_store


@pytest.fixture(scope="module")
def day_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return table_log(tmp_path_factory.mktemp("source"))


def _alert_keys(floor) -> list[tuple[int, str, str]]:  # type: ignore[no-untyped-def]
    return sorted((a.seq, a.code, a.severity) for a in floor.alerts.values())


def _as_read_in_one_go(floor, source: bytes, day_log: Path,  # type: ignore[no-untyped-def]
                       tmp_path: Path):
    """``floor`` holds every record of the day once, an alert for every warning and critical
    deviation, and the table's state of a floor that read the logs in one go (returned)."""
    assert floor.store.stats()["records"] == source.count(b"\n")
    expected = [d for d in deviations_in(day_log) if d[2] in ("warning", "critical")]
    assert _alert_keys(floor) == sorted(expected)
    one_go = open_floor([tmp_path / "logs"], tmp_path / "other")
    drain(one_go)
    a, b = floor.tables["BP-01"].state, one_go.tables["BP-01"].state
    assert (a.state, a.shoe, a.round, a.day_cards, a.last_seq, len(a.rounds)) == \
        (b.state, b.shoe, b.round, b.day_cards, b.last_seq, len(b.rounds))
    return one_go


def test_a_log_followed_in_pieces_gives_every_record_once_and_every_deviation_an_alert(
        day_log: Path, tmp_path: Path) -> None:
    source = day_log.read_bytes()
    target = tmp_path / "logs" / "BP-01" / day_log.name
    floor = open_floor([tmp_path / "logs"], tmp_path / "floor")
    seen = 0
    for piece in grow(source, target, [1000, 1001, 50_000, 50_017, 120_000, 230_011]):
        append(target, piece)
        seen += drain(floor)
    lines = source.count(b"\n")
    assert seen == lines == floor.store.stats()["records"]
    expected = [d for d in deviations_in(day_log) if d[2] in ("warning", "critical")]
    assert expected and _alert_keys(floor) == sorted(expected)
    summary = floor.table_summary("BP-01")
    last = orjson.loads(source.splitlines()[-1])
    assert summary["state"] == last["state"] == "closed"
    assert summary["profile"] == "gr-banco-punto" and summary["chain_ok"]
    assert summary["open_alerts"] == len(expected) and summary["worst"] == "critical"


def test_a_commit_that_fails_loses_nothing_the_floor_had_taken(day_log: Path,
                                                                tmp_path: Path) -> None:
    """The floor moves a file's position and its table's state before the commit; when the
    commit fails, both go back to what the index holds, and the records are taken again."""
    source = day_log.read_bytes()
    target = tmp_path / "logs" / "BP-01" / day_log.name
    floor = open_floor([tmp_path / "logs"], tmp_path / "floor")
    real = floor.store.commit_runs
    fail = {1, 2}  # the second and third pieces' first commits fail
    at = [0]  # the piece being taken

    def flaky(runs):  # type: ignore[no-untyped-def]
        if at[0] in fail:
            fail.discard(at[0])
            raise RuntimeError("the database went away")
        return real(runs)

    floor.store.commit_runs = flaky  # type: ignore[method-assign]
    for number, piece in enumerate(grow(source, target, [1000, 50_000, 120_000])):
        at[0] = number
        append(target, piece)
        try:
            drain(floor)
        except RuntimeError:
            drain(floor)  # the next poll takes the same records again
    assert not fail
    one_go = _as_read_in_one_go(floor, source, day_log, tmp_path)
    assert floor.tables["BP-01"].state.records == one_go.tables["BP-01"].state.records


def test_a_line_being_written_waits_for_its_newline(day_log: Path, tmp_path: Path) -> None:
    lines = day_log.read_bytes().splitlines(keepends=True)
    target = tmp_path / "logs" / "BP-01" / day_log.name
    target.parent.mkdir(parents=True)
    floor = open_floor([tmp_path / "logs"], tmp_path / "floor")
    append(target, b"".join(lines[:5]) + lines[5][:40])
    assert drain(floor) == 5
    append(target, lines[5][40:])
    assert drain(floor) == 1 and floor.tables["BP-01"].state.last_seq == 6


def test_a_restart_mid_day_neither_loses_nor_doubles(day_log: Path, tmp_path: Path) -> None:
    source = day_log.read_bytes()
    target = tmp_path / "logs" / "BP-01" / day_log.name
    target.parent.mkdir(parents=True)
    half = source.index(b"\n", len(source) // 2) + 1
    append(target, source[:half])
    floor = open_floor([tmp_path / "logs"], tmp_path / "floor")
    drain(floor)
    before = _alert_keys(floor)
    first = min(floor.alerts)
    floor.ack(first, "Ann Pit", "seen on camera")
    floor.stop()
    floor.store.close()

    append(target, source[half:])
    again = open_floor([tmp_path / "logs"], tmp_path / "floor")
    assert _alert_keys(again) == before  # restored from the index, not raised again
    assert again.alerts[first].acked_by == "Ann Pit"
    drain(again)
    _as_read_in_one_go(again, source, day_log, tmp_path)


def test_a_tampered_record_is_a_critical_chain_alert_naming_table_and_seq(
        day_log: Path, tmp_path: Path) -> None:
    lines = day_log.read_bytes().splitlines(keepends=True)
    n = next(i for i, line in enumerate(lines) if b'"type":"card"' in line and i > 40)
    rec = orjson.loads(lines[n])
    card = rec["event"]["card"]
    lines[n] = lines[n].replace(f'"card":"{card}"'.encode(),
                                b'"card":"' + (b"2C" if card != "2C" else b"3C") + b'"')
    target = tmp_path / "logs" / "BP-01" / day_log.name
    target.parent.mkdir(parents=True)
    target.write_bytes(b"".join(lines))
    floor = open_floor([tmp_path / "logs"], tmp_path / "floor")
    assert drain(floor) == n  # the records before it, and nothing from it on
    breaks = [a for a in floor.alerts.values() if a.code == CHAIN_BREAK]
    assert len(breaks) == 1
    alert = breaks[0]
    assert (alert.table, alert.seq, alert.severity) == ("BP-01", rec["seq"], "critical")
    assert "BP-01" in alert.message and f"seq {rec['seq']}" in alert.message
    assert "edited" in alert.message
    assert not floor.table_summary("BP-01")["chain_ok"]
    append(target, lines[0])  # nothing more is read from a broken file
    assert drain(floor) == 0


def test_a_record_rewritten_after_the_floor_read_it_is_found_at_restart(
        day_log: Path, tmp_path: Path) -> None:
    target = tmp_path / "logs" / "BP-01" / day_log.name
    target.parent.mkdir(parents=True)
    target.write_bytes(day_log.read_bytes())
    floor = open_floor([tmp_path / "logs"], tmp_path / "floor")
    drain(floor)
    floor.store.close()
    text = target.read_bytes().replace(b'"offset":', b'"offset":1', 1)
    target.write_bytes(text)
    again = open_floor([tmp_path / "logs"], tmp_path / "floor")
    rewritten = [a for a in again.alerts.values() if a.code == LOG_REWRITTEN]
    assert len(rewritten) == 1 and rewritten[0].severity == "critical"
    assert "changed after the floor read it" in rewritten[0].message
    again.store.close()


def test_a_tail_cut_after_the_floor_read_it_is_found_at_restart(day_log: Path,
                                                                tmp_path: Path) -> None:
    target = tmp_path / "logs" / "BP-01" / day_log.name
    target.parent.mkdir(parents=True)
    text = day_log.read_bytes()
    target.write_bytes(text)
    floor = open_floor([tmp_path / "logs"], tmp_path / "floor")
    drain(floor)
    floor.store.close()
    target.write_bytes(text[: text.index(b"\n", len(text) // 2) + 1])
    again = open_floor([tmp_path / "logs"], tmp_path / "floor")
    cut = [a for a in again.alerts.values() if a.code == LOG_REWRITTEN]
    assert len(cut) == 1 and "shorter" in cut[0].message
    assert cut[0].seq == text.count(b"\n")


def _day(root: Path, table: str, date: dt.date, records: int, **kw: object) -> None:
    def clock():
        return (dt.datetime.combine(date, dt.time(10), tzinfo=dt.UTC))
    with open_table_log(root, table, date, clock=clock, **kw) as log:  # type: ignore[arg-type]
        for i in range(records):
            log.write("note", {"table": table, "state": "closed", "shoe": 1, "round": i},
                      text=f"step {i}")


def test_rotated_files_continue_one_chain_and_a_forged_link_is_an_alert(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    _day(root, "RU-03", dt.date(2026, 11, 20), 30)
    _day(root, "RU-03", dt.date(2026, 11, 21), 20)
    floor = open_floor([root], tmp_path / "floor")
    assert drain(floor) == 50 + 2 * 0  # notes only: no header, no anchor records in the log
    assert not floor.alerts
    # a third day whose first record says it continues a head that is not the chain's
    path = root / "RU-03" / "RU-03-2026-11-22.jsonl"
    _day(root, "RU-03", dt.date(2026, 11, 22), 5)
    lines = path.read_bytes().splitlines(keepends=True)
    _day(tmp_path / "elsewhere", "RU-03", dt.date(2026, 11, 22), 5)
    forged = (tmp_path / "elsewhere" / "RU-03" / path.name).read_bytes()
    path.write_bytes(forged)  # a file from another chain, with no link to this one
    assert lines
    drain(floor)
    breaks = [a for a in floor.alerts.values() if a.code == CHAIN_BREAK]
    assert len(breaks) == 1 and "does not continue the chain" in breaks[0].message


def test_a_new_chain_with_a_reason_is_a_warning(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    _day(root, "BJ-01", dt.date(2026, 11, 20), 3)
    day_file = table_files(root, "BJ-01")[0]
    day_file.write_bytes(day_file.read_bytes()[:-5])  # the day's file torn: it cannot continue
    _day(root, "BJ-01", dt.date(2026, 11, 20), 3, new_log_reason="disk replaced")
    floor = open_floor([root], tmp_path / "floor")
    drain(floor)
    new = [a for a in floor.alerts.values() if a.code == CHAIN_NEW]
    assert len(new) == 1 and new[0].severity == "warning" and "disk replaced" in new[0].message


def test_an_acknowledgement_goes_to_the_floors_own_verified_log(day_log: Path,
                                                                tmp_path: Path) -> None:
    target = tmp_path / "logs" / "BP-01" / day_log.name
    target.parent.mkdir(parents=True)
    target.write_bytes(day_log.read_bytes())
    floor = open_floor([tmp_path / "logs"], tmp_path / "floor")
    drain(floor)
    ids = sorted(floor.alerts)
    floor.ack(ids[0], "Ann Pit", "dealer retrained")
    floor.ack(ids[1], "Bo Surv", "")
    with pytest.raises(AckError, match="acknowledged by Ann Pit"):
        floor.ack(ids[0], "Bo Surv", "again")
    with pytest.raises(AckError, match="'by'"):
        floor.ack(ids[2], "  ", "")
    with pytest.raises(AckError, match="no alert 999"):
        floor.ack(999, "Ann Pit", "")
    floor.stop()
    files = table_files(tmp_path / "floor" / "floorlog", "floor")
    check = verify_set(files)
    assert check.ok, check.lines()
    acks = [orjson.loads(line) for line in files[0].read_bytes().splitlines()]
    assert [(a["by"], a["note"], a["alert"]["id"]) for a in acks] == [
        ("Ann Pit", "dealer retrained", ids[0]), ("Bo Surv", "", ids[1])]
    assert {a["alert"]["table"] for a in acks} == {"BP-01"}


def test_an_ack_the_index_missed_is_taken_back_from_the_floors_log(day_log: Path,
                                                                  tmp_path: Path) -> None:
    target = tmp_path / "logs" / "BP-01" / day_log.name
    target.parent.mkdir(parents=True)
    target.write_bytes(day_log.read_bytes())
    floor = open_floor([tmp_path / "logs"], tmp_path / "floor")
    drain(floor)
    first = min(floor.alerts)
    floor.ack(first, "Ann Pit", "ok")
    floor.stop()
    floor.store.db.execute("UPDATE alerts SET acked_by = NULL, acked_at = NULL")  # the crash
    floor.store.close()
    again = open_floor([tmp_path / "logs"], tmp_path / "floor")
    assert again.alerts[first].acked_by == "Ann Pit"


def test_an_open_table_gone_silent_is_an_alert_once(day_log: Path, tmp_path: Path) -> None:
    source = day_log.read_bytes()
    target = tmp_path / "logs" / "BP-01" / day_log.name
    target.parent.mkdir(parents=True)
    target.write_bytes(source[: source.index(b"\n", len(source) // 2) + 1])
    now = [0.0]
    floor = open_floor([tmp_path / "logs"], tmp_path / "floor", silent_after=60.0,
                       clock=lambda: now[0])
    drain(floor)
    last = parse_ts(floor.tables["BP-01"].state.last_ts)
    assert last is not None
    now[0] = last + 30
    floor._last_silence_check = 0
    drain(floor)
    assert not [a for a in floor.alerts.values() if a.code == TABLE_SILENT]
    for later in (last + 61, last + 200):
        now[0] = later
        floor._last_silence_check = 0
        drain(floor)
    silent = [a for a in floor.alerts.values() if a.code == TABLE_SILENT]
    assert len(silent) == 1 and "BP-01" in silent[0].message


def test_the_floors_own_log_is_not_followed_as_a_table(day_log: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "BP-01").mkdir(parents=True)
    (logs / "BP-01" / day_log.name).write_bytes(day_log.read_bytes())
    floor = open_floor([logs], tmp_path / "unused")
    floor.audit_dir = logs  # the floor's log beside the tables'
    drain(floor)
    floor.ack(min(floor.alerts), "Ann Pit", "")
    drain(floor)
    assert set(floor.tables) == {"BP-01"}


def test_records_appended_to_a_file_after_the_table_moved_on_are_an_alert(
        tmp_path: Path) -> None:
    from controller.audit import AuditLog

    root = tmp_path / "logs"
    _day(root, "RU-03", dt.date(2026, 11, 20), 10)
    _day(root, "RU-03", dt.date(2026, 11, 21), 10)
    floor = open_floor([root], tmp_path / "floor")
    drain(floor)
    assert not floor.alerts
    older = table_files(root, "RU-03")[0]
    with AuditLog.open(older, durability="none") as log:  # its own chain goes on, validly
        log.write("note", {"table": "RU-03", "state": "closed"}, text="written later")
    assert floor.poll() == 0  # between listings only the newest file is read
    drain(floor)  # the next listing finds it
    (alert,) = floor.alerts.values()
    assert alert.code == CHAIN_BREAK and alert.seq == 11
    assert "after the table had moved on" in alert.message


def test_live_states_deferred_over_several_commits_are_saved_once_as_commit_by_commit(
        day_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        mocker: MockerFixture) -> None:
    """A consumer with records waiting (``defer_live``) saves the tables' live states once
    for several commits, and what it saves is what saving after every commit left: the
    newest state, and every round any of the commits touched."""
    monkeypatch.setattr(floor.core, "LIVE_EVERY", 3600.0)
    source = day_log.read_bytes()
    cuts = [len(source) // 3, 2 * len(source) // 3]
    floors = {}
    for name, defer in (("busy", True), ("each", False)):
        target = tmp_path / name / "logs" / "BP-01" / day_log.name
        floors[name] = (open_floor([target.parent.parent], tmp_path / name), target,
                        grow(source, target, cuts))
        floors[name][0].defer_live = defer
    busy = floors["busy"][0]
    busy._live_saved = time.monotonic()
    saves = mocker.spy(busy.store, "save_lives")
    for i in range(len(cuts) + 1):
        for fl, target, pieces in floors.values():
            append(target, pieces[i])
            assert drain(fl) > 0
    assert saves.call_count == 0 and busy.store.live_state() == []
    busy.save_live_states()
    assert saves.call_count == 1
    each = floors["each"][0]
    assert busy.store.live_state() == each.store.live_state() != []
    assert busy.store.rounds_of("BP-01") == each.store.rounds_of("BP-01") != []


def test_a_floor_restarted_after_a_long_stop_does_not_call_a_table_silent_at_once(
        day_log: Path, tmp_path: Path) -> None:
    """A floor down for ten minutes comes back to tables whose last record it holds is old:
    the table may well have written since (its records are on their way). Silence is
    judged from when the floor began to listen; a table that then writes nothing for
    ``silent_after`` is silent, once."""
    source = day_log.read_bytes()
    target = tmp_path / "logs" / "BP-01" / day_log.name
    target.parent.mkdir(parents=True)
    target.write_bytes(source[: source.index(b"\n", len(source) // 2) + 1])
    last = parse_ts(orjson.loads(target.read_bytes().splitlines()[-1])["ts"])
    assert last is not None
    now = [last + 600.0]  # the floor starts ten minutes after the table's last record
    floor = open_floor([tmp_path / "logs"], tmp_path / "floor", silent_after=60.0,
                       clock=lambda: now[0])
    drain(floor)
    floor._last_silence_check = 0
    drain(floor)
    assert not [a for a in floor.alerts.values() if a.code == TABLE_SILENT]
    now[0] += 61
    floor._last_silence_check = 0
    drain(floor)
    silent = [a for a in floor.alerts.values() if a.code == TABLE_SILENT]
    assert len(silent) == 1 and "wrote nothing for 661 s" in silent[0].message
