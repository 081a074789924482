"""A log's own anchors guard its tail when a writer continues it, and when it is verified
with a torn last line: a cut tail, or lines after the writer's close, are named as damage
and never "recovered" (a review: a forged record appended after the close, then half a
line, was cut back to the forgery, anchored, and then verified clean)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from test_audit_helpers import (
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
    verify_set,
)
from controller.audit.recovery import recover
from controller.audit.sets import APPENDED, TRUNCATED
from controller.audit.verify import TORN
from controller.profiles import load_profile

DAY = dt.date(2026, 11, 21)


def _closed_day(tmp_path: Path) -> tuple[Path, AnchorSink]:
    """A whole day, closed by its writer (a ``close`` anchor at its last record)."""
    anchors = AnchorSink(tmp_path / "anchors.jsonl", syslog=False)
    path = write_day(tmp_path / "logs", DAY, anchors=anchors)
    mine = [a for a in read_anchors(anchors.path or "") if a.file == path.name]
    assert mine[-1].reason == "close" and mine[-1].seq == records(path)[-1]["seq"]
    return path, anchors


def _forged_after(path: Path) -> bytes:
    """A record that follows the file's last one, its hash right (anyone can make it)."""
    last = records(path)[-1]
    forged = dict(records(path)[-3], seq=last["seq"] + 1, prev=last["hash"])
    forged.pop("hash")
    forged["hash"] = expected_hash(forged)
    return line_of(forged)


TORN_BYTES = b'{"event":{"type":"ca'


def test_recovery_refuses_lines_after_the_writers_close(tmp_path: Path) -> None:
    path, anchors = _closed_day(tmp_path)
    original = read_lines(path)
    for tail in ([_forged_after(path), TORN_BYTES], [TORN_BYTES]):
        write_lines(path, [*original, *tail])
        before = path.read_bytes()
        for whole in (True, False):  # audit recover; a controller's restart
            with pytest.raises(AuditLogError, match="the writer closed this file at seq") as e:
                recover(path, anchors=anchors, whole=whole)
            assert "follow it" in str(e.value) and "nothing was cut or written" in str(e.value)
            assert path.read_bytes() == before


def test_recovery_refuses_a_tail_cut_past_its_anchors_then_torn(tmp_path: Path) -> None:
    path, anchors = _closed_day(tmp_path)
    lines = read_lines(path)
    write_lines(path, [*lines[:100], lines[100][:40]])  # cut mid-record, hundreds anchored
    before = path.read_bytes()
    with pytest.raises(AuditLogError, match="record\\(s\\) anchored before are gone"):
        recover(path, anchors=anchors, whole=True)
    assert path.read_bytes() == before


def test_a_writer_refuses_to_continue_a_cut_or_appended_log(tmp_path: Path) -> None:
    path, anchors = _closed_day(tmp_path)
    lines = read_lines(path)
    forged = _forged_after(path)
    write_lines(path, lines[:-20])  # the last records cut off, whole lines
    with pytest.raises(AuditLogError, match="20 record\\(s\\) anchored before are gone"):
        AuditLog.open(path, anchors=anchors)
    write_lines(path, [*lines, forged])
    with pytest.raises(AuditLogError, match="and 1 record\\(s\\) follow it"):
        AuditLog.open(path, anchors=anchors)
    edited = dict(records(path)[-2], ts="2026-11-21T23:59:59.999Z")  # the head rewritten
    edited.pop("hash")
    edited["hash"] = expected_hash(edited)
    write_lines(path, [*lines[:-1], line_of(edited)])
    with pytest.raises(AuditLogError, match="the log was rewritten"):
        AuditLog.open(path, anchors=anchors)
    write_lines(path, lines)  # as its writer left it: continued, and anchored 'open'
    AuditLog.open(path, anchors=anchors).close()
    assert [a.reason for a in anchors.recorded(path.name)][-2:] == ["open", "close"]
    assert verify_set([path], anchors=read_anchors(anchors.path or "")).ok


def test_a_crash_after_the_writer_reopened_is_recovered(tmp_path: Path) -> None:
    path, anchors = _closed_day(tmp_path)
    log = AuditLog.open(path, anchors=anchors)  # a later run: 'open' anchored, then it dies
    log.writer._sink.close()
    with open(path, "ab") as f:
        f.write(TORN_BYTES)
    result = recover(path, anchors=anchors, whole=True)
    result.log.close()
    assert result.cut is not None and verify_file(path).ok
    assert verify_set([path], anchors=read_anchors(anchors.path or "")).ok


def test_verify_names_a_cut_tail_and_lines_after_close_behind_a_torn_line(
        tmp_path: Path) -> None:
    path, anchors = _closed_day(tmp_path)
    lines = read_lines(path)
    write_lines(path, [*lines[:100], lines[100][:40]])
    (check,) = verify_set([path], anchors=read_anchors(anchors.path or "")).tables
    kinds = [p.kind for p in check.problems]
    assert kinds == [TORN, TRUNCATED]
    assert check.problems[0].detail is not None and "not a crash" in check.problems[0].detail
    assert check.problems[1].seq == 101 and "then a torn line" in check.problems[1].reason
    write_lines(path, [*lines, TORN_BYTES])
    (check,) = verify_set([path], anchors=read_anchors(anchors.path or "")).tables
    assert [p.kind for p in check.problems] == [TORN, APPENDED]
    assert check.problems[1].reason.startswith("a torn line after the writer closed")
    assert check.problems[1].seq == len(lines) + 1


def test_the_anchors_of_one_file_are_read_from_a_shared_anchor_file(tmp_path: Path) -> None:
    anchors = AnchorSink(tmp_path / "anchors.jsonl", syslog=False)
    assert anchors.recorded("T1-2026-11-21.jsonl") == []  # no anchor file yet
    for name, seq in (("T1-2026-11-21.jsonl", 5), ("T2-2026-11-21.jsonl", 9),
                      ("T1-2026-11-21.jsonl", 7)):
        anchors.write(table=name[:2], file=name, seq=seq, hash="ab" * 32, reason="shoe_end",
                      ts="2026-11-21T10:00:00.000Z")
    with open(anchors.path or "", "ab") as f:
        f.write(b'{"file":"T1-2026-11-21.jsonl","seq":')  # a torn last anchor line: skipped
    got = anchors.recorded("/elsewhere/T1-2026-11-21.jsonl")
    assert [(a.seq, a.line) for a in got] == [(5, 1), (7, 3)]
    assert AnchorSink(None, syslog=False).recorded("T1-2026-11-21.jsonl") == []


def test_an_anchor_file_that_does_not_read_does_not_stop_the_log(tmp_path: Path) -> None:
    path, anchors = _closed_day(tmp_path)
    with open(anchors.path or "", "ab") as f:
        f.write(f'{{"file":"{path.name}","seq":"many"}}\n'.encode())
    log = AuditLog.open(path, anchors=anchors)  # not checked, and said so
    (trouble,) = log.take_anchor_trouble()
    log.close()
    assert "could not be read to check this log's tail" in trouble and "line" in trouble


@pytest.mark.parametrize("left", [b"", b'{"ev'])
def test_a_log_its_anchors_say_had_records_and_now_has_none_is_refused(
        tmp_path: Path, left: bytes) -> None:
    """A review of the first fix: a file emptied, or cut to half a line, had no whole record
    to check and passed — and was started again from seq 1."""
    path, anchors = _closed_day(tmp_path)
    path.write_bytes(left)
    with pytest.raises(AuditLogError, match="the file holds no whole record: it was cut or "
                                            "emptied"):
        recover(path, anchors=anchors, whole=True)
    assert path.read_bytes() == left


def test_a_zero_filled_tail_is_a_crash_and_a_write_only_anchor_target_no_failure(
        tmp_path: Path) -> None:
    """A power cut can leave the blocks of a write zero-filled: crash residue, cut. An
    anchor target this account can only write to (a device) is not read at open, and is no
    ANCHOR_WRITE_FAILED (a review)."""
    anchors = AnchorSink(tmp_path / "anchors.jsonl", syslog=False)
    log = open_table_log(tmp_path / "logs", "T1", DAY, anchors=anchors)
    profile = load_profile("gr-blackjack")
    feed_log(log, profile, day_events(profile, DAY, seed=3)[:60])
    log.writer._sink.close()  # dies in a write whose blocks came back as zeros
    path = Path(log.writer.name)
    with open(path, "ab") as f:
        f.write(b"\0" * 100)
    recover(path, anchors=anchors, whole=True).log.close()
    assert verify_file(path).ok
    device = AnchorSink(os.devnull, syslog=False)
    assert device.recorded(path.name) == []
    log = AuditLog.open(path, anchors=device)  # (/dev/null takes no fsync: that is said)
    assert not [t for t in log.take_anchor_trouble() if "could not be read" in t]
    log.close()


def test_a_new_file_whose_only_anchors_are_its_opens_is_taken_when_it_holds_nothing(
        tmp_path: Path) -> None:
    """A day file continuing another anchors 'open' at the chain's head there (seq 62);
    emptied by a crash before its first record, a restart that opened it again at seq 0
    must not be refused (a review). Any anchor but those opens, or a later open above
    the file's first, says records were written."""
    from controller.audit.anchors import Anchor
    from controller.audit.opening import check_anchored

    path = tmp_path / "T1-2026-11-22.jsonl"
    path.write_bytes(b"")

    def anchors(*spec: tuple[str, int]) -> list[Anchor]:
        return [Anchor("T1", path.name, seq, "ab" * 32, "t", reason, n + 1)
                for n, (reason, seq) in enumerate(spec)]

    fd = os.open(path, os.O_RDONLY)
    try:
        check_anchored(fd, str(path), anchors(("open", 62), ("open", 0)))
        for spec in ((("open", 62), ("round_end", 70)), (("open", 0), ("open", 5))):
            with pytest.raises(AuditLogError, match="holds no whole record"):
                check_anchored(fd, str(path), anchors(*spec))
    finally:
        os.close(fd)
