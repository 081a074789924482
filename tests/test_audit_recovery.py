"""Crash recovery: a torn last line is cut, recorded, and the session rebuilt from the inputs."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path

import pytest
from test_audit_helpers import (
    KEY,
    day_events,
    expected_hash,
    feed_log,
    line_of,
    read_lines,
    records,
    write_day,
    write_lines,
)

from controller.audit import (
    AnchorSink,
    AuditLog,
    AuditLogError,
    open_table_log,
    read_anchors,
    verify_file,
)
from controller.audit.recovery import recover
from controller.audit.replay import replay
from controller.cli import main
from controller.engine import TableEngine
from controller.events import parse_event
from controller.profiles import load_profile

DAY = dt.date(2026, 11, 21)
NAME = "gr-blackjack"


def _events() -> list[dict]:
    """A day that stops mid-shoe with a device fault still open."""
    events = day_events(load_profile(NAME), DAY, seed=7)
    cards = [i for i, e in enumerate(events) if e["type"] == "card"]
    cut = cards[60]
    head = events[:cut]
    head.insert(cards[40], {"type": "device_fault", "device": "shoe", "code": "reader"})
    return head


def _crashed_log(tmp_path: Path, events: list[dict], key: bytes | None = None) -> Path:
    path = tmp_path / "T1.jsonl"
    log = AuditLog.open(path, durability="input", key=key)
    feed_log(log, load_profile(NAME), events)
    log.writer._sink.close()  # the process dies: no close(), no anchor
    return path


def _fresh_engine(inputs: list[dict]) -> TableEngine:
    engine = TableEngine(load_profile(NAME))
    for event in inputs:
        engine.handle(parse_event(event))
    return engine


def _surviving_inputs(path: Path) -> list[dict]:
    return [r["event"] for r in records(path) if r["kind"] == "input"]


def _state(engine: TableEngine) -> tuple:
    return (engine.context(), engine.accounting(), engine.open_faults, engine.prompt(),
            engine.dealer, engine.sabot, sorted(engine.seen.items()))


@pytest.mark.parametrize("fraction", [0.0, 0.25, 0.5, 0.99])
@pytest.mark.parametrize("last", ["output", "input"])
def test_torn_last_line_is_cut_recorded_and_the_session_rebuilt(
        tmp_path: Path, fraction: float, last: str) -> None:
    events = _events()
    if last == "input":  # end on a card with no output: the last record is that input
        events = events[:max(i for i, e in enumerate(events) if e["type"] == "card") + 1]
    path = _crashed_log(tmp_path, events)
    lines = read_lines(path)
    assert json.loads(lines[-1])["kind"] == last
    keep = max(1, int((len(lines[-1]) - 1) * fraction))  # 1 byte … all but the newline
    torn = lines[-1][:keep]
    write_lines(path, [*lines[:-1], torn])
    good = records(Path(_copy_prefix(tmp_path, lines[:-1])))

    result = recover(path)
    result.log.close()

    # what was cut, independently computed
    assert result.cut is not None
    assert (result.cut.line, result.cut.bytes) == (len(lines), len(torn))
    assert result.cut.sha256 == hashlib.sha256(torn).hexdigest()
    assert result.cut.offset == sum(len(x) for x in lines[:-1])
    # the chain is whole and continues from the last good record
    assert verify_file(path).ok
    recs = records(path)
    assert recs[: len(good)] == good
    rec = recs[len(good)]
    assert rec["kind"] == "recovery" and rec["prev"] == good[-1]["hash"]
    assert rec["cut"] == {"line": len(lines), "offset": result.cut.offset, "bytes": len(torn),
                          "sha256": hashlib.sha256(torn).hexdigest()}
    # the rebuilt engine is an engine fed the surviving inputs
    survivors = [r["event"] for r in good if r["kind"] == "input"]
    assert rec["inputs_replayed"] == len(survivors)
    expected = _fresh_engine(survivors)
    assert _state(result.session.engine) == _state(expected)
    assert result.session.engine.open_faults  # the fault that was open is open again
    assert {k: rec[k] for k in ("table", "shoe", "round", "state")} == expected.context()
    # a torn output is recomputed and restored after the recovery record; a torn input is gone
    restored = [r["output"] for r in recs[len(good) + 1:] if r["kind"] == "output"]
    if last == "output":
        assert restored and restored[-1] == json.loads(lines[-1])["output"]
    else:
        assert restored == []
    assert rec["restored_outputs"] == len(restored)
    assert replay([path]).identical


def _copy_prefix(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / "prefix.jsonl"
    write_lines(path, lines)
    return path


def test_recovered_session_goes_on_and_the_day_replays(tmp_path: Path) -> None:
    events = day_events(load_profile(NAME), DAY, seed=7)
    cut = len(events) // 2
    path = _crashed_log(tmp_path, events[:cut])
    data = path.read_bytes()
    path.write_bytes(data[:-7])
    result = recover(path)
    session = result.session
    assert session.audit is result.log
    for n, event in enumerate(events[cut:], start=cut + 1):
        session.feed(parse_event(event), line=n)
    session.close()
    assert verify_file(path).ok
    assert replay([path]).identical
    whole = _fresh_engine(events)
    assert session.engine.context() == whole.context() and session.engine.state == "closed"
    assert session.tally.rounds == sum(
        1 for r in records(path) if r["kind"] == "output"
        and r["output"]["type"] == "note" and r["output"]["kind"] == "round")


def test_outputs_lost_without_a_torn_line_are_restored(tmp_path: Path) -> None:
    path = _crashed_log(tmp_path, _events())
    lines = read_lines(path)
    outputs_at_end = 0
    while json.loads(lines[-1 - outputs_at_end])["kind"] == "output":
        outputs_at_end += 1
    assert outputs_at_end >= 1
    write_lines(path, lines[:-outputs_at_end])  # the crash came after the input's fsync
    assert not replay([path]).identical
    result = recover(path)
    result.log.close()
    assert result.cut is None and result.restored_outputs == outputs_at_end
    assert result.record["cut"] is None
    assert replay([path]).identical and verify_file(path).ok


def test_recovery_refuses_a_damaged_log(tmp_path: Path) -> None:
    path = _crashed_log(tmp_path, _events())
    lines = read_lines(path)
    lines[5] = lines[5].replace(b'"state"', b'"stat"', 1)
    lines[-1] = lines[-1][:10]
    write_lines(path, lines)
    before = path.read_bytes()
    with pytest.raises(AuditLogError) as info:
        recover(path)
    assert info.value.line == 6
    assert path.read_bytes() == before  # nothing cut, nothing written


def test_audit_recover_refuses_damage_before_the_window_a_restart_checks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A controller reopening a log checks its last window only (bounded time, however long
    the log); ``audit recover`` — the auditor's command — checks every record before the
    torn line, so an edit far back is refused, nothing cut, nothing written."""
    import controller.audit.verify as verify_mod

    monkeypatch.setattr(verify_mod, "TAIL_BYTES", 4096)  # a day's log is far longer
    path = _crashed_log(tmp_path, _events())
    lines = read_lines(path)
    lines[5] = lines[5].replace(b'"state"', b'"stat"', 1)  # line 6: outside the last 4 KiB
    lines[-1] = lines[-1][:10]
    write_lines(path, lines)
    before = path.read_bytes()
    with pytest.raises(AuditLogError) as info:
        recover(path, whole=True)
    assert info.value.line == 6 and path.read_bytes() == before
    capsys.readouterr()
    assert main(["audit", "recover", str(path)]) == 1
    said = capsys.readouterr().err
    assert "refused" in said and "line 6" in said and "nothing was cut" in said
    assert path.read_bytes() == before


@pytest.mark.parametrize("copied", [False, True])
def test_recovery_refuses_a_file_a_later_file_of_the_set_follows(tmp_path: Path,
                                                                 copied: bool) -> None:
    """Only the newest file of a table's set can have been cut by a crash: a torn line in
    an earlier day's file, whose next day continues from its end, is damage — refused,
    nothing cut (the next day's link would otherwise be broken by the cut). So also in an
    auditor's copy of the set in a directory not named after the table (``copied``): the
    later file was looked for under the table's name, not found, and the earlier file
    "recovered", the chain its next day links to rewritten (a review)."""
    first = write_day(tmp_path / "logs", dt.date(2026, 11, 20))
    second = write_day(tmp_path / "logs", DAY, seed=4)
    if copied:
        copy = tmp_path / "evidence"
        copy.mkdir()
        for path in (first, second):
            (copy / path.name).write_bytes(path.read_bytes())
        first = copy / first.name
    lines = read_lines(first)
    lines[-1] = lines[-1][:10]
    write_lines(first, lines)
    before = first.read_bytes()
    with pytest.raises(AuditLogError, match=r"T1-2026-11-21\.jsonl follows this file"):
        recover(first)
    assert first.read_bytes() == before


def test_keyed_recovery_continues_the_mac_chain(tmp_path: Path) -> None:
    path = _crashed_log(tmp_path, _events(), key=KEY)
    data = path.read_bytes()
    path.write_bytes(data[:-12])
    result = recover(path, key=KEY)
    result.log.close()
    assert verify_file(path, key=KEY).ok
    with pytest.raises(AuditLogError, match="keyed"):
        recover(path)  # without the key it will not write
    data = path.read_bytes()
    path.write_bytes(data[:-12])
    with pytest.raises(AuditLogError, match=r"keyed.*torn last line was not cut"):
        recover(path)
    assert path.read_bytes() == data[:-12]  # refused before cutting anything


def test_recovery_anchor_and_rotation(tmp_path: Path) -> None:
    anchors = AnchorSink(tmp_path / "anchors.jsonl", syslog=False)
    first = write_day(tmp_path / "logs", dt.date(2026, 11, 20), anchors=anchors)
    log = open_table_log(tmp_path / "logs", "T1", DAY, anchors=anchors)
    feed_log(log, load_profile(NAME), _events())
    log.writer._sink.close()  # the process dies in a write: no close, no anchor
    second = Path(log.writer.name)
    lines = read_lines(second)
    write_lines(second, [*lines, lines[-1][:-5]])
    result = recover(second, anchors=anchors)
    result.log.close()
    reasons = [a.reason for a in read_anchors(tmp_path / "anchors.jsonl") if a.file == second.name]
    assert reasons[-3:] == ["open", "recovery", "close"]
    # the first record of the day still continues the day before
    assert records(second)[0]["chain"]["continues"]["file"] == first.name


def test_torn_first_line_of_a_rotated_file_keeps_the_chain(tmp_path: Path) -> None:
    first = write_day(tmp_path / "logs", dt.date(2026, 11, 20))
    second = write_day(tmp_path / "logs", DAY, seed=4)
    second.write_bytes(read_lines(second)[0][:40])  # only a torn header survived
    result = recover(second)
    assert result.session is None
    result.log.close()
    rec = records(second)[0]
    last = records(first)[-1]
    assert rec["kind"] == "recovery" and rec["prev"] == last["hash"]
    assert rec["seq"] == last["seq"] + 1 and rec["hash"] == expected_hash(rec)
    assert rec["chain"]["continues"]["file"] == first.name


def test_recover_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = _crashed_log(tmp_path, _events())
    data = path.read_bytes()
    path.write_bytes(data[:-9])
    assert main(["audit", "recover", str(path)]) == 0
    out = capsys.readouterr().out
    assert "recovered: cut a torn line" in out and "1 output(s) restored" in out
    assert main(["audit", "verify", str(path)]) == 0
    lines = read_lines(path)
    lines[3] = lines[3].replace(b'"shoe"', b'"shoo"', 1)
    write_lines(path, lines)
    assert main(["audit", "recover", str(path)]) == 1
    assert "refused" in capsys.readouterr().err
    assert main(["audit", "recover", str(tmp_path / "nope.jsonl")]) == 2


@pytest.mark.parametrize("where", ["a directory", "its directory", "a FIFO"])
def test_recover_refuses_anchors_it_cannot_write_before_touching_the_log(
        tmp_path: Path, capsys: pytest.CaptureFixture, where: str) -> None:
    # a review: `--anchors DIR` (or a file under a missing directory) recovered the log,
    # wrote no anchor and said nothing (exit 0)
    path = _crashed_log(tmp_path, _events())
    data = path.read_bytes()[:-9]
    path.write_bytes(data)
    anchors = {"a directory": tmp_path, "its directory": tmp_path / "none" / "a.jsonl",
               "a FIFO": tmp_path / "fifo"}[where]
    if where == "a FIFO":  # (writing to it waits for a reader: recover hung, the log cut)
        os.mkfifo(anchors)
    assert main(["audit", "recover", "--no-syslog", "--anchors", str(anchors), str(path)]) == 2
    assert f"--anchors {anchors}: " in capsys.readouterr().err
    assert path.read_bytes() == data  # the torn line is still there: nothing was done


def test_recover_leaves_a_file_that_is_no_log_as_it_is(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """An empty file had a recovery record written into it ('state None, shoe None')."""
    from controller.cli import main

    empty = tmp_path / "T1-2026-11-21.jsonl"
    empty.write_bytes(b"")
    assert main(["audit", "recover", str(empty)]) == 2
    assert "empty: it holds no record" in capsys.readouterr().err
    assert empty.read_bytes() == b""


@pytest.mark.parametrize("data", [b"my secret table notes, one line", bytes(range(256)) * 2,
                                  b"\0" * 4096, b'{"a": 1}'])
def test_recover_leaves_another_programs_file_as_it_is(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes) -> None:
    """A one-line text, binary or JSON file (no newline at its end) was "recovered": its
    line cut as a torn write and the file replaced by a recovery record (a review)."""
    path = tmp_path / "notes.txt"
    path.write_bytes(data)
    assert main(["audit", "recover", "--no-syslog", str(path)]) == 2
    assert "not an audit log" in capsys.readouterr().err
    assert path.read_bytes() == data


@pytest.mark.parametrize(("tail", "why"), [
    (b"garbage with no newline", "does not begin as a record does"),
    (b'{"note": "a whole object"}', "a whole JSON value, but no record"),
    (b'{"ev\xff\xfe\xfdent":', "not UTF-8 text"),
])
def test_recovery_cuts_only_a_record_cut_short(tmp_path: Path, tail: bytes, why: str) -> None:
    path = _crashed_log(tmp_path, _events())
    data = path.read_bytes() + tail
    path.write_bytes(data)
    for whole in (True, False):
        with pytest.raises(AuditLogError, match=why):
            recover(path, whole=whole)
        assert path.read_bytes() == data
    path.write_bytes(data[:-len(tail)] + b'{"event":{"type":"card","card":"A\xe2\x99')
    recover(path).log.close()  # a character cut in two at the end: a crash's
    assert verify_file(path).ok


def test_recover_names_a_broken_last_line_with_its_newline_as_damage(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # a review: half a record and then its newline was refused (right: the writer writes a
    # line and its newline at once, so a crash leaves none) as "damage before the last line"
    path = _crashed_log(tmp_path, _events())
    data = path.read_bytes()
    broken = data[:-9] + b"\n"
    path.write_bytes(broken)
    assert main(["audit", "recover", str(path)]) == 1
    err = capsys.readouterr().err
    assert "the last line ends with its newline, so it was written whole" in err, err
    assert path.read_bytes() == broken


def test_a_restart_says_when_the_log_does_not_replay_as_the_engine_decides(
        tmp_path: Path) -> None:
    """A review: a log whose chain was rebuilt after an output was changed was recovered
    with 'nothing cut; N input(s) replayed' — the differences only in the record."""
    path = _crashed_log(tmp_path, _events())
    recs = records(path)
    i = next(i for i, r in enumerate(recs) if r["kind"] == "output"
             and r["output"].get("type") == "prompt" and i > 20)
    recs[i]["output"]["text"] = "Deal on: nothing to see here."
    prev = recs[i - 1]["hash"]
    for r in recs[i:]:  # the chain rebuilt from there: it verifies
        r["prev"] = prev
        r.pop("hash")
        r["hash"] = prev = expected_hash(r)
    write_lines(path, [line_of(r) for r in recs])
    assert verify_file(path).ok
    result = recover(path)
    result.log.close()
    assert result.differences
    assert f"{len(result.differences)} difference(s) (audit replay names them)" in \
        result.summary()
