"""Opening a long log checks its tail, in bounded time (issue 9: 14.6 s of CPU before the
first card after a restart on a 990k-record log).

:func:`~controller.audit.verify.verify_tail` checks the last ``window`` bytes exactly as
:func:`~controller.audit.verify.verify_file` checks a whole file, with line numbers
counted from the start of the file; what lies before the window is ``audit verify``'s to
judge. Here the window is made small so that short logs are "long".
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
from test_audit_helpers import feed_log, line_of, read_lines, write_lines

from controller.audit import AuditLog, AuditLogError, record_hash, verify_file
from controller.audit import verify as verify_module
from controller.audit.verify import verify_tail
from controller.profiles import load_profile
from simulators.dealer import DayPlan, table_day

WINDOW = 20_000


def _log(path: Path, key: bytes | None = None) -> Path:
    steps = table_day(load_profile("gr-blackjack"), 3, DayPlan(shoes=2))
    with AuditLog.open(path, durability="none", key=key) as log:
        feed_log(log, load_profile("gr-blackjack"), [s.event for s in steps])
    assert path.stat().st_size > 10 * WINDOW
    return path


def _edit(path: Path, line: int) -> None:
    lines = read_lines(path)
    rec = json.loads(lines[line - 1])
    rec["ts"] = "2026-11-21T23:59:59.999Z"  # content changed, hash not recomputed
    lines[line - 1] = line_of(rec)
    write_lines(path, lines)


def _line_in_window(path: Path, back: int) -> int:
    """The number of a line ``back`` lines before the end (inside the window)."""
    return len(read_lines(path)) - back


def test_an_intact_long_log_verifies_by_its_tail(tmp_path: Path) -> None:
    path = _log(tmp_path / "day.jsonl")
    whole = verify_file(path)
    tail = verify_tail(path, window=WINDOW)
    assert tail.ok and whole.ok
    assert (tail.head_seq, tail.head, tail.mac_head) == (whole.head_seq, whole.head,
                                                         whole.mac_head)
    assert tail.records < whole.records / 5  # only the window was read


@pytest.mark.parametrize("back", [1, 5, 20])
def test_an_edit_in_the_window_is_found_on_the_same_line(tmp_path: Path, back: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = _log(tmp_path / "day.jsonl")
    line = _line_in_window(path, back)
    _edit(path, line)
    whole, tail = verify_file(path), verify_tail(path, window=WINDOW)
    assert not tail.ok and not whole.ok
    assert (tail.first_bad_line, tail.problem, tail.first_bad_seq) == (
        whole.first_bad_line, whole.problem, whole.first_bad_seq) == (
        line, whole.problem, whole.first_bad_seq)
    with pytest.raises(AuditLogError) as info:
        _open(path, monkeypatch)
    assert info.value.line == line


def test_an_edit_before_the_window_is_left_to_audit_verify(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _log(tmp_path / "day.jsonl")
    _edit(path, 10)
    assert not verify_file(path).ok  # audit verify finds it
    assert verify_tail(path, window=WINDOW).ok  # a restart does not wait for it
    _open(path, monkeypatch).close()


def test_a_torn_last_line_of_a_long_log_is_torn_on_its_line(tmp_path: Path) -> None:
    path = _log(tmp_path / "day.jsonl")
    with open(path, "ab") as f:
        f.write(b'{"kind":"input","seq":')
    whole, tail = verify_file(path), verify_tail(path, window=WINDOW)
    assert (tail.ok, tail.problem, tail.first_bad_line) == (False, "torn",
                                                            whole.first_bad_line)


def test_a_keyed_long_log_checks_its_key_and_its_tail_macs(tmp_path: Path) -> None:
    key = secrets.token_bytes(32)
    path = _log(tmp_path / "day.jsonl", key=key)
    assert verify_tail(path, key=key, window=WINDOW).ok
    other = verify_tail(path, key=secrets.token_bytes(32), window=WINDOW)
    assert (other.ok, other.problem, other.first_bad_line) == (False, "wrong-key", 1)
    # a record in the window rewritten with its hash recomputed, without the key
    lines = read_lines(path)
    n = len(lines) - 3
    rec = json.loads(lines[n - 1])
    rec["ts"] = "2026-11-21T23:59:59.999Z"
    body = {k: v for k, v in rec.items() if k != "hash"}
    rec["hash"] = record_hash(body)
    lines[n - 1] = line_of(rec)
    write_lines(path, lines)
    forged = verify_tail(path, key=key, window=WINDOW)
    assert (forged.ok, forged.first_bad_line) == (False, n)
    assert forged.problem == verify_file(path, key=key).problem


def _open(path: Path, monkeypatch: pytest.MonkeyPatch) -> AuditLog:
    """Open ``path`` for appending as a writer does, with the small window."""
    monkeypatch.setattr(verify_module, "TAIL_BYTES", WINDOW)
    return AuditLog.open(path, durability="none")
