"""The simulated table in a child process, and the thread that reads its dealer console.

``python -m simulators.pty_host`` runs apart from the controller (as real devices
would), exits with its parent, and prints its port paths on one line; its stderr is kept
for the reason of a failure. The console channel's JSON lines go to the runtime's queue,
where the sequencer puts them in step order with what the drivers make.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from collections import deque

from controller.app.bench.options import EXIT_FAILED, BenchError
from controller.app.runtime import TableRuntime
from simulators.dealer import DayPlan
from simulators.pty_host import sweep_stale_link_dirs
from simulators.scenario import Scenario

log = logging.getLogger("shoewarden.bench")


class Simulator:
    """``python -m simulators.pty_host`` in a child process (which exits with its parent)."""

    def __init__(self, argv: list[str], *, verbose: bool = False) -> None:
        self.argv = argv
        self.verbose = verbose
        self.stderr: deque[str] = deque(maxlen=40)
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self._drain = threading.Thread(target=self._read_stderr, name="sim-stderr",
                                       daemon=True)
        self._drain.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))
            if self.verbose:
                sys.stderr.write(line)

    def ports(self, timeout: float) -> dict[str, str]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.stop()
            why = "; ".join(self.stderr) or f"no port list within {timeout:g} s"
            raise BenchError(f"the simulator did not start: {why}", EXIT_FAILED)
        try:
            ports = json.loads(line)
        except ValueError as e:
            self.stop()
            raise BenchError(f"the simulator printed {line!r}, not its ports: {e}",
                             EXIT_FAILED) from e
        return {str(k): str(v) for k, v in ports.items()}

    def exited(self) -> int | None:
        return self.proc.poll()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._drain.join(2)
        sweep_stale_link_dirs()  # the child's, if it was killed before it could clean up


def console_reader(path: str, runtime: TableRuntime, stop: threading.Event,
                   failed: list[str]) -> threading.Thread:
    """A thread reading the console FIFO's JSON lines into the runtime's queue. It never
    dies silently: an error is put in ``failed`` (and logged)."""

    def run() -> None:
        fd = -1
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            buf = b""
            seen = False
            while not stop.is_set():
                ready, _, _ = select.select([fd], [], [], 0.1)
                if not ready:
                    continue
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not data:  # no writer: not there yet, or gone
                    if seen:
                        return
                    time.sleep(0.02)
                    continue
                seen = True
                buf += data
                *lines, buf = buf.split(b"\n")
                for raw in lines:
                    if raw.strip():
                        runtime.post_console(json.loads(raw))
        except Exception as e:
            log.exception("console channel reader failed")
            failed.append(f"the console channel reader failed: {type(e).__name__}: {e}")
        finally:
            if fd >= 0:
                os.close(fd)

    thread = threading.Thread(target=run, name="console-channel", daemon=True)
    thread.start()
    return thread


def simulator_argv(profile_arg: str, seed: int, plan: DayPlan, scenario: Scenario | None,
                   pace: float | None) -> list[str]:
    """The child's command line: the same day the controller expects."""
    argv = [sys.executable, "-m", "simulators.pty_host", "--profile", profile_arg,
            "--seed", str(seed), "--shoes", str(plan.shoes), "--rounds-per-block",
            str(plan.rounds_per_block), "--table", plan.table, "--exit-with-parent"]
    if plan.decks is not None:
        argv += ["--decks", str(plan.decks)]
    if scenario is not None:
        argv += ["--scenario", scenario.path]
    if pace is not None:
        argv += ["--pace", str(pace)]
    return argv
