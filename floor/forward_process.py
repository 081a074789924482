"""``run``/``bench --publish``: the table's forwarder as a child process of its own.

The forwarder (:mod:`floor.forward`) used to run on a thread of the table's process. Its
asyncio loop and nats-py's per-record work then take the GIL from the engine thread: on a
quiet machine a card's software time went from p99 0.27 ms without the forwarder to
0.97 ms with the thread, and 0.26 ms with the same forwarder as a process of its own
(``benchmarks/floor_nats_bench.py``). The target is ≤ 0.1 ms p99 added, so the table now
starts ``shoewarden forward --logs ROOT --table ID --until-eof`` (every ``--publish`` URL,
``--nats-creds``, ``--nats-ca`` and ``--disclosure`` passed on) as a child process and
never waits for it.

How the two talk — a pipe, no ctypes, nothing but the child's stdin and stdout:

- **stdin**: the child follows the log until its stdin reaches end of file, then sends what
  is left as :func:`floor.forward.finish` does (up to the timeout; the table may write
  ``finish SECONDS`` first) and exits. The table closes the pipe at a normal stop; when the
  table is killed (SIGKILL, a crash) the kernel closes it, so the child finishes and exits
  too, never lingering. SIGTERM (systemd stops the whole unit) does the same; Ctrl-C at the
  table's terminal is the table's to act on (the child is in a process group of its own).
- **stdout**: one JSON line at the end, :data:`STATUS_KEYS` (records published, already in
  the stream, held back for their shoe, caught up or not), from which the table prints the
  line the thread printed.
- **dies on its way**: the table says so once on its error stream, naming the exit status,
  deals on, and starts the child again after 1 s (doubling up to 30 s while it keeps
  dying): the new one asks the stream where the table stands and resumes there, so nothing
  is lost or sent twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from floor.forward import Connection, ForwardError, finish_line, table_of_log

#: the keys of the child's status line
STATUS_KEYS = ("published", "duplicates", "held", "caught_up", "failures", "error")
#: how much longer than the finish timeout the table waits for the child to exit (its
#: connection drained, the interpreter gone) before it kills it
EXIT_GRACE = 5.0
RESTART_FIRST = 1.0
RESTART_MAX = 30.0
#: the child's niceness: on a table's few cores the engine thread comes first; the
#: forwarder is not in a hurry (a record waits a few ms more, the floor sees it later)
NICE = 10
#: a child that ran this long before it died is restarted after RESTART_FIRST again
RESTART_RESET_AFTER = 60.0


def child_argv(root: Path, table: str, connection: Connection) -> list[str]:
    """The child's command line: this table's log, every connection option passed on."""
    argv = [sys.executable, "-m", "controller", "forward", "--logs", str(root),
            "--table", table, "--until-eof"]
    for server in connection.servers:
        argv += ["--publish", server]
    if connection.creds:
        argv += ["--nats-creds", connection.creds]
    if connection.tls_ca:
        argv += ["--nats-ca", connection.tls_ca]
    return [*argv, "--disclosure", connection.disclosure]


def describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"{code} (killed by {signal.Signals(-code).name})"
    return str(code)


def parse_status(out: bytes | str | None) -> dict[str, Any] | None:
    """The child's status line: the last line of its stdout that is a JSON object."""
    text = out.decode(errors="replace") if isinstance(out, bytes) else (out or "")
    for line in reversed(text.splitlines()):
        with contextlib.suppress(ValueError):
            status = json.loads(line)
            if isinstance(status, dict) and "published" in status:
                return status
    return None


class ForwarderProcess:
    """The table's forwarder in a child process (see the module doc). ``say``: where a line
    for the operator goes when the child dies on its way (the table's error stream)."""

    def __init__(self, root: Path, table: str, connection: Connection, *,
                 say: Callable[[str], None], restart_first: float = RESTART_FIRST) -> None:
        self.connection = connection
        self.table = table
        self.argv = child_argv(root, table, connection)
        self.say = say
        self.restart_first = restart_first
        self.published = 0
        self.duplicates = 0
        self.held = 0
        self.caught_up = False
        self.error: str | None = None
        self.exits: list[int] = []  # the status of each child that died on its way
        self.proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._finishing = threading.Event()
        self._watcher: threading.Thread | None = None
        self._started_at = 0.0

    def start(self) -> ForwarderProcess:
        with self._lock:
            self._spawn()
        self._watcher = threading.Thread(target=self._watch, name="shoewarden-forwarder-watch",
                                         daemon=True)
        self._watcher.start()
        return self

    def _spawn(self) -> None:
        # process_group=0: Ctrl-C at the table's terminal reaches the table, not the child;
        # the table then asks the child to finish. stderr is the table's: the child's
        # warnings reach the operator.
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     process_group=0)
        self._started_at = time.monotonic()

    def _watch(self) -> None:
        """Wait on the child; one that exits before the table asked it to is reported once
        and started again."""
        delay = self.restart_first
        while True:
            proc = self.proc
            assert proc is not None
            code = proc.wait()
            with self._lock:
                if self._finishing.is_set():
                    return
                self._take(proc)
                self.exits.append(code)
                ran = time.monotonic() - self._started_at
            if ran >= RESTART_RESET_AFTER:
                delay = self.restart_first
            self.say(f"the NATS forwarder (pid {proc.pid}) exited with status "
                     f"{describe_exit(code)}; the table deals on (its log keeps every "
                     f"record); starting it again in {delay:g} s, it resumes where the "
                     f"stream stands")
            if self._finishing.wait(delay):
                return
            with self._lock:
                if self._finishing.is_set():
                    return
                try:
                    self._spawn()
                except OSError as exc:
                    self.say(f"the NATS forwarder could not be started again: {exc}; the "
                             "table deals on; `shoewarden forward` sends its log later")
                    return
            delay = min(delay * 2, RESTART_MAX)

    def _take(self, proc: subprocess.Popen[bytes]) -> bool:
        """Add a finished child's status to the totals; False when it left none."""
        out = b""
        if proc.stdout is not None:
            with contextlib.suppress(OSError, ValueError):
                out = proc.stdout.read()
        status = parse_status(out)
        if status is None:
            return False
        self.published += int(status.get("published") or 0)
        self.duplicates += int(status.get("duplicates") or 0)
        self.held = int(status.get("held") or 0)
        self.caught_up = bool(status.get("caught_up"))
        self.error = status.get("error") or None
        return True

    def finish(self, timeout: float = 10.0) -> str:
        """At the table's end: ask the child to send what is left (up to ``timeout``, as
        :func:`floor.forward.finish`), wait for it, and return the operator's line."""
        with self._lock:
            self._finishing.set()
            proc = self.proc
        assert proc is not None
        out: bytes | None = None
        try:
            out, _ = proc.communicate(f"finish {timeout:g}\n".encode(),
                                      timeout=timeout + EXIT_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        except (BrokenPipeError, OSError, ValueError):
            with contextlib.suppress(OSError, ValueError):
                out = proc.stdout.read() if proc.stdout is not None else b""
            proc.wait()
        if self._watcher is not None:
            self._watcher.join(1)
        status = parse_status(out)
        if status is None:
            self.caught_up = False
        else:
            self.published += int(status.get("published") or 0)
            self.duplicates += int(status.get("duplicates") or 0)
            self.held = int(status.get("held") or 0)
            self.caught_up = bool(status.get("caught_up"))
            self.error = status.get("error") or None
        return finish_line(self.published, self.held, not self.caught_up, timeout,
                           duplicates=self.duplicates)

    def alive_after_stop(self) -> bool:
        """True when the child had not caught up when it was stopped (as the thread's)."""
        return not self.caught_up


def forwarder_process_for_log(log_file: str | Path, connection: Connection, *,
                              say: Callable[[str], None]) -> ForwarderProcess:
    """``--publish``: the forwarder of the table whose log is ``log_file``
    (``<root>/<table>/…``), started in a child process."""
    path = Path(log_file)
    table = table_of_log(path, "--publish")
    try:
        return ForwarderProcess(path.parent.parent, table, connection, say=say).start()
    except OSError as exc:
        raise ForwardError(f"--publish: cannot start the forwarder: {exc}") from None


# --------------------------------------------------------------------------- the child


def follow_until_eof(fwd: Any, timeout: float) -> dict[str, Any]:
    """The child's side (``forward --until-eof``): follow until stdin ends (or SIGTERM),
    then finish as the thread did, and return the status line's fields."""
    from floor.forward import finish

    ended = threading.Event()
    asked = [timeout]

    def read_stdin() -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in sys.stdin.buffer:  # ``finish SECONDS`` from the table
                parts = line.split()
                if len(parts) == 2 and parts[0] == b"finish":
                    with contextlib.suppress(ValueError):
                        asked[0] = float(parts[1])
        ended.set()

    with contextlib.suppress(OSError):  # before its threads start: they inherit it
        os.nice(NICE)
    signal.signal(signal.SIGTERM, lambda *_: ended.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the table's to act on
    threading.Thread(target=read_stdin, name="stdin-eof", daemon=True).start()
    fwd.start()
    while not ended.wait(0.2):
        if not fwd.running():
            break  # the forwarder stopped on an error: exit, the table starts another
    finish(fwd, asked[0])
    return {"published": fwd.published, "duplicates": fwd.duplicates, "held": fwd.held,
            "caught_up": not fwd.alive_after_stop(), "failures": fwd.failures,
            "error": (str(fwd.error) if fwd.error is not None else
                      "; ".join(fwd.damaged.values()) or None)}
