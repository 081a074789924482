"""``shoewarden floor`` on the command line, and ``run --display`` beside a table."""

from __future__ import annotations

import contextlib
import io
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2 as httpx
import pytest

from controller.app.run import EXIT_BAD_INPUT, run_table
from tests.floor_helpers import table_log
from tests.test_app_run import write_config

ROOT = Path(__file__).resolve().parent.parent


def _floor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "controller", "floor", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("args", "message"), [
    (["--logs", "/nonexistent/logs"], "--logs /nonexistent/logs: no such directory"),
    (["--http", "nowhere"], "expected HOST:PORT"),
    (["--http", "127.0.0.1:http"], "is not a number"),
    (["--db", "mysql://floor"], "use sqlite:///PATH or postgresql://"),
    (["--nats", "nats://127.0.0.1:1"], "give --logs DIR (log files) or --nats URL"),
    (["--db", "postgresql://sw:secret@127.0.0.1:1/floor"],
     "cannot open the floor's database postgresql://sw@127.0.0.1:1/floor"),
    # a review: "[Errno 17] File exists: '//…'", naming no option
    (["--log", "/etc/hostname"], "--log /etc/hostname: not a directory"),
    (["--log", "/etc/hostname/floor"], "--log /etc/hostname/floor: /etc/hostname is not a dir"),
    (["--nats", "ws://127.0.0.1:1"], "expected nats://HOST:PORT (or tls://HOST:PORT)"),
    (["--silent-after", "nan"], "argument --silent-after: expected seconds more than 0"),
])
def test_bad_floor_options_are_one_line_and_exit_2(tmp_path: Path, args: list[str],
                                                   message: str) -> None:
    base = {"--logs": str(tmp_path), "--log": str(tmp_path / "floor")}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    r = _floor(*[x for kv in base.items() for x in kv])
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_a_port_in_use_is_one_line_naming_the_option_and_exit_2(tmp_path: Path) -> None:
    taken = socket.create_server(("127.0.0.1", 0))
    try:
        http = f"127.0.0.1:{taken.getsockname()[1]}"
        r = _floor("--logs", str(tmp_path), "--log", str(tmp_path / "floor"), "--http", http)
    finally:
        taken.close()
    assert r.returncode == 2, r
    assert r.stderr.startswith(f"shoewarden floor: --http {http}: cannot listen: "), r.stderr
    assert len(r.stderr.splitlines()) == 1 and "following" not in r.stdout


@pytest.mark.slow
def test_the_floor_command_serves_the_tables_it_follows(tmp_path: Path) -> None:
    table_log(tmp_path / "logs")
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller", "floor", "--logs", str(tmp_path / "logs"),
         "--http", "127.0.0.1:0", "--log", str(tmp_path / "floor")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "following" in first
        # port 0: the line names the port the OS chose, the one the floor listens on
        said = re.search(r"http://127\.0\.0\.1:(\d+)/", first)
        assert said is not None and int(said[1]) != 0, first
        port = int(said[1])
        assert port in _listening_ports(proc.pid)
        deadline = time.monotonic() + 20
        tables = None
        while not tables:  # (until it serves, and has read the table's log)
            assert time.monotonic() < deadline and proc.poll() is None
            with contextlib.suppress(httpx.HTTPError):
                tables = httpx.get(f"http://127.0.0.1:{port}/api/tables", timeout=2).json()
            if not tables:
                time.sleep(0.1)
        assert [t["table"] for t in tables] == ["BP-01"]
        assert (tmp_path / "floor" / "floor.sqlite").exists()
        # a browser watching the live stream when the floor is stopped (systemctl stop):
        # the stream ends as a response, the floor exits at once and says nothing alarming
        opened = threading.Event()
        ended: list[bytes] = []

        def watch() -> None:
            with httpx.stream("GET", f"http://127.0.0.1:{port}/api/events",
                              timeout=30) as r:
                for chunk in r.iter_bytes():
                    opened.set()
                    ended.append(chunk)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        assert opened.wait(10)
        proc.terminate()
        # (uvicorn raises the signal again once it has shut down: systemd's clean stop)
        assert proc.wait(20) in (0, -signal.SIGTERM)
        watcher.join(10)
        assert not watcher.is_alive()  # the stream ended, not cut by a time-out
        assert proc.stderr is not None
        err = proc.stderr.read()
        assert "Traceback" not in err and "Exception in ASGI application" not in err, err
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(20)


def _listening_ports(pid: int) -> list[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        m = re.match(r"socket:\[(\d+)\]", target)
        if m:
            inodes.add(m.group(1))
    ports = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        parts = line.split()
        if parts[3] == "0A" and parts[9] in inodes:  # LISTEN
            ports.append(int(parts[1].split(":")[1], 16))
    return ports


class _Console(io.StringIO):
    """The dealer's stdin, fed line by line by the test."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: queue.Queue[str] = queue.Queue()

    def readline(self, *_args: object) -> str:
        return self.lines.get()


def test_run_serves_its_dealer_display_from_its_own_log(tmp_path: Path) -> None:
    config = write_config(tmp_path / "table.toml", None)
    stdin, out, err = _Console(), io.StringIO(), io.StringIO()
    done: list[int] = []
    t = threading.Thread(target=lambda: done.append(run_table(
        str(config), stdin=stdin, out=out, err=err, display="127.0.0.1:0")), daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while "dealer display at " not in out.getvalue():
        assert time.monotonic() < deadline, (out.getvalue(), err.getvalue())
        time.sleep(0.05)
    url = re.search(r"dealer display at (\S+)", out.getvalue()).group(1)  # type: ignore[union-attr]

    def state() -> dict:
        return httpx.get(url + "api/state", timeout=5).json() or {}

    while state().get("profile") != "gr-stud-poker":  # the display has read the header
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert state()["state"] in (None, "closed")
    stdin.lines.put("o\n")  # the dealer opens the table: the display shows the next step
    while state().get("state") in (None, "closed"):
        assert time.monotonic() < deadline, out.getvalue()
        time.sleep(0.05)
    assert state()["table"] == "T1" and state()["prompt"]
    page = httpx.get(url, timeout=5).text
    assert 'data-field="prompt"' in page
    stdin.lines.put("quit\n")
    t.join(20)
    assert done == [0], err.getvalue()
    with pytest.raises(httpx.HTTPError):  # the display stopped with the table
        httpx.get(url + "api/state", timeout=2)


def test_run_display_on_a_bad_address_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path / "table.toml", None)
    err = io.StringIO()
    code = run_table(str(config), stdin=io.StringIO(""), out=io.StringIO(), err=err,
                     display="127.0.0.1:notaport")
    assert code == EXIT_BAD_INPUT and "--display" in err.getvalue()
