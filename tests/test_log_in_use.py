"""One controller per table (issue 8, section 2).

A second ``run`` on a table whose log another process is writing used to be told the log
"does not verify" and offered ``--new-log-reason``, which forked a second chain while the
first controller wrote on. Now it is told the log is in use, and by which process, and
nothing is changed — with or without ``--new-log-reason``.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.app.run import EXIT_BAD_INPUT, EXIT_OK, run_table
from controller.audit import table_files
from controller.audit.lock import LogInUseError, hold_table
from controller.cli import main

ROOT = Path(__file__).resolve().parent.parent


def config(tmp_path: Path) -> Path:
    path = tmp_path / "table.toml"
    path.write_text('table = "T1"\nprofile = "gr-blackjack"\nlog_dir = "logs"\n'
                    'anchors = "anchors.jsonl"\nanchors_syslog = false\n')
    return path


def test_a_second_run_is_told_the_log_is_in_use_and_never_forks(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    first = subprocess.Popen([sys.executable, "-m", "controller", "run", "--table", str(cfg)],
                             cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert first.stdout is not None and first.stdin is not None
        assert "shoewarden run: table T1" in first.stdout.readline()
        first.stdin.write("o 6\n")
        first.stdin.flush()
        while "table_open" not in first.stdout.readline():
            pass
        files_before = table_files(tmp_path / "logs", "T1")
        for reason in (None, "log edited; checked by the pit boss"):
            out, err = io.StringIO(), io.StringIO()
            code = run_table(str(cfg), stdin=io.StringIO("o 6\nquit\n"), out=out, err=err,
                             new_log_reason=reason)
            assert code == EXIT_BAD_INPUT
            assert f"in use by process {first.pid}" in err.getvalue(), err.getvalue()
            assert "(shoewarden run --table" in err.getvalue()  # its command line
            assert "does not verify" not in err.getvalue() and out.getvalue() == ""
            assert table_files(tmp_path / "logs", "T1") == files_before  # no second chain
        first.stdin.write("quit\n")
        first.stdin.flush()
        assert first.wait(30) == EXIT_OK
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    out, err = io.StringIO(), io.StringIO()  # the first has stopped: the table is free
    assert run_table(str(cfg), stdin=io.StringIO("quit\n"), out=out, err=err) == EXIT_OK
    assert main(["audit", "verify", *map(str, table_files(tmp_path / "logs", "T1"))]) == 0


def test_recover_refuses_a_log_in_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    log_dir = tmp_path / "logs" / "T1"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom controller.audit.lock import hold_table\n"
         "h = hold_table(sys.argv[1])\nprint('held', flush=True)\ntime.sleep(60)",
         str(log_dir)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        log = log_dir / "T1-2026-11-24.jsonl"
        log.write_bytes(b'{"kind":"hea')  # a torn line the live writer may be finishing
        assert main(["audit", "recover", str(log)]) == 2
        assert f"in use by process {holder.pid}" in capsys.readouterr().err
        assert log.read_bytes() == b'{"kind":"hea'
        with pytest.raises(LogInUseError):
            hold_table(log_dir)
    finally:
        holder.kill()
        holder.wait()
    with hold_table(log_dir), hold_table(log_dir):  # free again; re-entrant in a process
        pass
    assert oct(os.stat(log_dir / ".shoewarden.lock").st_mode & 0o777) == "0o640"
