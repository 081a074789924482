"""Long work shows progress on a terminal and stays quiet elsewhere.

``audit verify``, ``audit replay``, ``audit report`` and ``bench`` draw a rich progress
bar on stderr when stderr is a terminal (a pty here), never when it is a pipe or a file,
and never with ``--no-progress``; what they print on stdout is the same either way. The
meters the audit layer reports through add up to every byte of the logs read.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from test_audit_helpers import feed_log

from controller.audit import AuditLog, verify_set
from controller.audit.replay import replay
from controller.audit.report import build_report
from controller.profiles import load_profile
from controller.progressbar import ProgressBar, total_bytes, wanted
from simulators.dealer import DayPlan, table_day

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100", "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def day_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("progress") / "day.jsonl"
    steps = table_day(load_profile("gr-blackjack"), 4, DayPlan(shoes=3))
    with AuditLog.open(path, durability="none") as log:
        feed_log(log, load_profile("gr-blackjack"), [s.event for s in steps])
    return path


def _in_a_terminal(argv: list[str], timeout: float = 120) -> tuple[int, str, bytes]:
    """Run ``argv`` with stderr on a pty and stdout on a pipe: (status, stdout, tty bytes)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave,
                            stdin=subprocess.DEVNULL, cwd=ROOT, env=ENV)
    os.close(slave)
    tty = bytearray()
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    out = bytearray()
    streams = {master: tty, proc.stdout.fileno(): out}
    while streams and time.monotonic() < deadline:
        ready, _, _ = select.select(list(streams), [], [], 0.5)
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the pty's other side closed (EIO)
                chunk = b""
            if chunk:
                streams[fd] += chunk
            else:
                del streams[fd]
    code = proc.wait(10)
    os.close(master)
    return code, out.decode(), bytes(tty)


def _piped(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=ENV,
                          timeout=120)


def test_a_bar_only_on_a_terminal_and_never_when_told_not_to() -> None:
    master, slave = pty.openpty()
    try:
        with open(slave, "w", closefd=False) as tty:
            assert wanted(stream=tty)
            assert not wanted(True, stream=tty)
            os.environ["TERM"], term = "dumb", os.environ.get("TERM")
            try:
                assert not wanted(stream=tty)
            finally:
                if term is None:
                    del os.environ["TERM"]
                else:
                    os.environ["TERM"] = term
    finally:
        os.close(master)
        os.close(slave)
    with open(os.devnull, "w") as null:
        assert not wanted(stream=null)
    r, w = os.pipe()
    with open(w, "w") as pipe:
        assert not wanted(stream=pipe)
    os.close(r)


def test_the_meters_add_up_to_every_byte_read(day_log: Path) -> None:
    size = day_log.stat().st_size
    assert total_bytes([day_log, day_log.parent / "missing.jsonl"]) == size
    seen: Counter[str] = Counter()

    def meter(phase: str, n: int) -> None:
        seen[phase] += n

    assert verify_set([day_log], meter=meter).ok
    assert seen == Counter({"verifying": size})
    seen.clear()
    assert replay([day_log], meter=meter).identical
    assert seen == Counter({"reading": size})
    seen.clear()
    assert build_report([day_log], meter=meter).verified
    assert seen == Counter({"verifying": size, "reading": size})


def test_a_disabled_bar_is_silent_and_passes_output_through() -> None:
    with ProgressBar(enabled=False, total=10) as bar:
        bar.meter("verifying", 5)
        bar.task("x")
        bar.update(3)
        assert bar.printer(sys.stdout) is sys.stdout


@pytest.mark.parametrize("command", [
    ["audit", "verify"], ["audit", "replay"], ["audit", "report"]])
def test_audit_tools_show_a_bar_on_a_terminal_only(day_log: Path, command: list[str]) -> None:
    argv = [sys.executable, "-m", "controller", *command, str(day_log)]
    code, out, tty = _in_a_terminal(argv)
    assert code == 0, tty
    label = b"reading the records" if command[1] == "replay" else b"verifying the chain"
    assert label in tty and b"\x1b[" in tty  # a bar was drawn (and erased: transient)
    piped = _piped(argv)
    assert piped.returncode == 0
    assert piped.stdout == out  # stdout the same with or without a bar
    assert "\x1b" not in piped.stderr and "verifying" not in piped.stderr
    code, out2, tty = _in_a_terminal([*argv, "--no-progress"])
    assert code == 0 and out2 == out
    assert b"\x1b[" not in tty and tty.strip() == b""


@pytest.mark.slow
def test_bench_shows_a_bar_on_a_terminal_and_prints_its_lines_intact(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "controller", "bench", "--profile", "gr-blackjack",
            "--shoes", "3", "--seed", "5", "--log", str(tmp_path / "logs")]
    code, out, tty = _in_a_terminal(argv, timeout=300)
    assert code == 0, (out, tty[-2000:])
    assert b"dealing 3 shoe(s)" in tty
    # stdout went to a pipe: the shoe lines and the summary are there, untouched
    shoes = [line for line in out.splitlines() if line.startswith("shoe ")]
    assert [line.split(":")[0] for line in shoes] == ["shoe 1", "shoe 2", "shoe 3"]
    assert "result: OK" in out and "\x1b" not in out
    code, out, tty = _in_a_terminal([*argv[:-1], str(tmp_path / "logs2"), "--no-progress"],
                                    timeout=300)
    assert code == 0 and b"dealing" not in tty
