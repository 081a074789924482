"""``shoewarden demo --tables N [--http HOST:PORT] [--duration S]``: a floor to watch.

N simulated tables of different profiles, each a ``shoewarden bench`` child process
dealing at a human pace into one log directory (some with dealer mistakes or device
faults, from ``config/scenarios/``), each serving its own dealer display; the floor follows
them all in this process. The URLs are printed; Ctrl-C (or ``--duration``) stops it all.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: (table id, profile, scenario or None): the tables of the demo, in order
TABLES: tuple[tuple[str, str, str | None], ...] = (
    ("BJ-01", "gr-blackjack", "dealer-mistakes"),
    ("BP-02", "gr-banco-punto", None),
    ("ST-03", "gr-stud-poker", "stud-foreign-card"),
    ("BP-04", "gr-banco-punto", "cut-and-shuffle-mistakes"),
    ("BJ-05", "gr-blackjack", "shoe-jam-door"),
    ("BT-06", "gr-baccarat-two-tableaux", None),
    ("RU-07", "ru-blackjack", None),
    ("LB-08", "live-baccarat", None),
    ("BJ-09", "gr-blackjack", "link-faults"),
    ("CF-10", "gr-chemin-de-fer", None),
)


@dataclass
class DemoTable:
    table: str
    profile: str
    scenario: str | None
    display: str | None
    process: subprocess.Popen[str] | None = None


def plan(n: int, host: str, port: int) -> list[DemoTable]:
    """The first ``n`` tables (cycled, numbered on), each with a display port after the
    floor's (none when the floor's port is 0: the OS chooses)."""
    out = []
    for i in range(n):
        table, profile, scenario = TABLES[i % len(TABLES)]
        if i >= len(TABLES):
            table = f"{table.split('-')[0]}-{i + 1:02d}"
        display = f"{host}:{port + 1 + i}" if port else None
        out.append(DemoTable(table, profile, scenario, display))
    return out


def bench_argv(t: DemoTable, logs: Path, pace: float, seed: int) -> list[str]:
    argv = [sys.executable, "-m", "controller", "bench", "--profile", t.profile, "--table",
            t.table, "--log", str(logs), "--pace", f"{pace:g}", "--shoes", "8", "--seed",
            str(seed), "--no-progress", "--stall-timeout", "600"]
    if t.scenario:
        argv += ["--scenario", t.scenario]
    if t.display:
        argv += ["--display", t.display]
    return argv


def _free(where: str) -> bool:
    """Can a server listen on ``HOST:PORT`` now?"""
    import socket

    host, _, port = where.rpartition(":")
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.bind((host.strip("[]"), int(port)))
    except (OSError, ValueError):
        return False
    return True


def run_demo(n: int, http: str, duration: float | None, pace: float, log: str | None,
             out: Any = sys.stdout) -> int:
    from floor.core import Floor
    from floor.serve import HostPortError, ServerThread, host_port
    from floor.store import FloorStore
    from floor.web import floor_app

    try:
        host, port = host_port(http)
    except HostPortError as e:
        print(f"shoewarden demo: --http {e}", file=sys.stderr)
        return 2
    if port and port + n > 65535:  # (the displays take the ports after the floor's)
        print(f"shoewarden demo: --http {http}: the {n} dealer display(s) take the ports "
              f"after it ({port + 1}–{port + n}), past 65535: give a lower port",
              file=sys.stderr)
        return 2
    work = Path(log) if log else Path(tempfile.mkdtemp(prefix="shoewarden-demo-"))
    logs = work / "tables"
    try:
        logs.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # (a file named as the directory, no permission: a review)
        print(f"shoewarden demo: --log {log}: cannot make {logs}: {e.strerror or e}",
              file=sys.stderr)
        return 2
    floor = Floor([logs], FloorStore(str(work / "floor" / "floor.sqlite")),
                  audit_dir=work / "floor", silent_after=60.0)
    try:
        web = ServerThread(floor_app(floor), host, port).start()
    except OSError as e:
        print(f"shoewarden demo: --http {http}: {e}", file=sys.stderr)
        return 2
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    tables = plan(n, shown if host in ("0.0.0.0", "") else host, web.port if port else 0)
    print(f"shoewarden demo: {n} table(s) dealing into {logs}", file=out)
    print(f"  the floor:  http://{shown}:{web.port}/", file=out)
    for i, t in enumerate(tables):
        if t.display and not _free(t.display):  # (its bench would deal with no display, and
            # the URL printed would be another program's: a review)
            print(f"  {t.table}: port {t.display} is in use: no dealer display", file=out)
            t.display = None
        t.process = subprocess.Popen(bench_argv(t, logs, pace, 1000 + i),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     text=True)
        what = f"{t.profile}" + (f", scenario {t.scenario}" if t.scenario else "")
        where = f"dealer display http://{t.display}/" if t.display else ""
        print(f"  {t.table:6} {what:45} {where}", file=out)
    out.flush()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    deadline = None if duration is None else time.monotonic() + duration
    try:
        while not stop.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                break
            if all(t.process is not None and t.process.poll() is not None for t in tables):
                break
            stop.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for t in tables:
            if t.process is not None and t.process.poll() is None:
                t.process.send_signal(signal.SIGINT)
        for t in tables:
            if t.process is not None:
                try:
                    t.process.wait(15)
                except subprocess.TimeoutExpired:
                    t.process.kill()
                    t.process.wait()
        time.sleep(0.3)  # the floor reads the last records
        web.stop()
        floor.store.close()
    alerts = list(floor.alerts.values())
    print(f"shoewarden demo: stopped; {floor.records_ingested} record(s) read, "
          f"{len(alerts)} alert(s), logs in {work}", file=out)
    return 0


def cmd_demo(args: Any) -> int:
    return run_demo(args.tables, args.http, args.duration, args.pace, args.log)
