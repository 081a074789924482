"""A full disk: nothing already accepted is lost, no half line is left, no traceback
(issue 8, section 2).

The disk is simulated by a quota on the log file's size: a write that would pass it writes
what fits and the next write fails with ENOSPC, as a real full disk does. Only writes to
the log under test are limited (every other ``os.write`` goes through).
"""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_audit_helpers import DAYS, day_events, write_day

from controller.audit import verify_file
from controller.cli import main
from controller.profiles import load_profile

ROOT = Path(__file__).resolve().parent.parent


class Quota:
    """Limits the size of one file; ``limit = None`` lifts it."""

    def __init__(self, path: Path, limit: int | None) -> None:
        self.path = str(path.resolve())
        self.limit = limit
        self.failed = 0

    def write(self, real, fd: int, data) -> int:  # type: ignore[no-untyped-def]
        if self.limit is not None and os.path.realpath(f"/proc/self/fd/{fd}") == self.path:
            room = self.limit - os.fstat(fd).st_size
            if room <= 0:
                self.failed += 1
                raise OSError(errno.ENOSPC, "No space left on device")
            if len(data) > room:
                return real(fd, bytes(data[:room]))
        return real(fd, data)


@pytest.fixture
def quota(monkeypatch: pytest.MonkeyPatch) -> Iterator[callable]:  # type: ignore[valid-type]
    real = os.write

    def make(path: Path, limit: int | None) -> Quota:
        q = Quota(path, limit)
        monkeypatch.setattr(os, "write", lambda fd, data: q.write(real, fd, data))
        return q
    yield make


def test_check_log_on_a_full_disk_is_one_message_and_a_log_that_verifies(
        tmp_path: Path, quota, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "check.jsonl"
    log.touch()
    q = quota(log, 60_000)
    code = main(["check", "--profile", "gr-blackjack", "--log", str(log),
                 str(ROOT / "config" / "examples" / "gr-blackjack-day.jsonl")])
    err = capsys.readouterr().err
    assert q.failed
    assert code == 2, err
    assert "Traceback" not in err and "cannot write the audit log" in err
    assert "gr-blackjack-day.jsonl:" in err  # the line it stopped at
    result = verify_file(log)
    assert result.ok and result.records > 10 and log.read_bytes().endswith(b"\n")
    assert log.stat().st_size <= 60_000


def _torn_log(tmp_path: Path) -> Path:
    path = write_day(tmp_path / "logs", DAYS[0], events=day_events(
        load_profile("gr-blackjack"), DAYS[0])[:120])
    with open(path, "ab") as f:
        f.write(b'{"kind":"input","event":{"type":"card","card":"7')  # a crash mid-write
    return path


def test_recover_on_a_full_disk_changes_nothing_and_keeps_the_evidence(
        tmp_path: Path, quota, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    path = _torn_log(tmp_path)
    before = path.read_bytes()
    torn = before[before.rfind(b"\n") + 1:]
    q = quota(path, len(before) + 20)  # room for less than the recovery record
    code = main(["audit", "recover", str(path)])
    err = capsys.readouterr().err
    assert q.failed and code == 1, err
    assert "Traceback" not in err and "nothing was changed" in err
    assert hashlib.sha256(torn).hexdigest() in err
    assert path.read_bytes() == before  # the torn line is still there, byte for byte
    q.limit = None  # space freed: the recovery goes through and records the evidence
    assert main(["audit", "recover", str(path)]) == 0
    out = capsys.readouterr().out
    assert hashlib.sha256(torn).hexdigest()[:16] in out
    assert verify_file(path).ok


def test_a_failed_log_write_leaves_no_half_line(tmp_path: Path, quota) -> None:  # type: ignore[no-untyped-def]
    from controller.audit import AuditLog, AuditLogError

    path = tmp_path / "log.jsonl"
    log = AuditLog.open(path, durability="none")
    log.write("note", {}, text="first")
    size = path.stat().st_size
    quota(path, size + 30)
    with pytest.raises(AuditLogError, match="last whole record"):
        log.write("note", {}, text="x" * 200)
    assert path.stat().st_size == size and verify_file(path).ok


def test_bench_whose_anchors_cannot_be_written_ends_with_its_summary(tmp_path: Path) -> None:
    """An anchor store that is full (/dev/full) is a critical alert, not a traceback."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "controller", "bench", "--profile",
                          "gr-blackjack", "--shoes", "1", "--seed", "3", "--log",
                          str(tmp_path / "logs"), "--anchors", "/dev/full"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode == 1
    assert "ANCHOR_WRITE_FAILED [critical]" in run.stdout
    assert "card check: 261 card(s)" in run.stdout and "OK, no card lost" in run.stdout
    assert run.stdout.rstrip().splitlines()[-1].startswith("result: FAILED")


def test_check_log_under_none_on_a_full_disk_is_still_one_message(
        tmp_path: Path, quota, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """Under 'none' the records wait in a batch and the last one is written at close: a
    full disk there is reported (exit 2), never swallowed."""
    stream = str(ROOT / "config" / "examples" / "gr-blackjack-day.jsonl")
    whole = tmp_path / "whole.jsonl"
    assert main(["check", "--profile", "gr-blackjack", "--log", str(whole), "--durability",
                 "none", stream]) in (0, 1)
    capsys.readouterr()
    log = tmp_path / "check.jsonl"
    log.touch()
    q = quota(log, whole.stat().st_size - 100)  # only the last batch, written at close, fails
    code = main(["check", "--profile", "gr-blackjack", "--log", str(log), "--durability", "none",
                 stream])
    err = capsys.readouterr().err
    assert q.failed
    assert code == 2, err
    assert "Traceback" not in err and "cannot write the audit log" in err
    result = verify_file(log)
    assert result.ok and log.read_bytes().endswith(b"\n")


@pytest.mark.slow
def test_bench_under_none_whose_last_batch_fails_ends_failed_not_with_a_traceback(
        tmp_path: Path, quota) -> None:  # type: ignore[no-untyped-def]
    import io

    from controller.app.bench import BenchOptions, run_bench

    def bench(logs: Path) -> object:
        return run_bench(BenchOptions(profile="gr-blackjack", shoes=1, seed=3, log=str(logs),
                                      durability="none", no_progress=True), io.StringIO())

    whole = bench(tmp_path / "a")
    assert whole.code == 0 and whole.log is not None  # type: ignore[attr-defined]
    name = whole.log.relative_to(tmp_path / "a")  # type: ignore[attr-defined]
    path = tmp_path / "b" / name
    path.parent.mkdir(parents=True)
    path.touch(mode=0o640)
    quota(path, whole.log.stat().st_size - 100)  # type: ignore[attr-defined]
    result = bench(tmp_path / "b")
    assert result.code != 0  # type: ignore[attr-defined]
    assert "could not be written" in (result.failure or "")  # type: ignore[attr-defined]
    assert verify_file(path).ok
