"""``shoewarden run --table FILE [--new-log-reason TEXT]``: one table, its devices, the dealer.

1. The table config (:mod:`controller.app.tableconfig`) names the profile, the devices
   (drivers, ports or USB ids), the allowlist, the log directory, the anchor file and
   the key file. Drivers are built before the log is touched, so a bad config changes
   nothing.
2. **The day's log.** If today's file exists, the controller stopped without closing it
   (a crash, a power cut, ``quit``): it is recovered
   (:func:`controller.audit.recovery.recover`: a torn last line is cut, the session is
   rebuilt by replaying the log, lost outputs are restored, a ``recovery`` record says
   what was done) and the console shows where the procedure stands. A log whose chain
   does not verify is **refused** (exit 2): only ``--new-log-reason TEXT`` starts a new
   file (the next part of the day, a new chain whose first record holds the reason and
   the broken file's head). Otherwise the day's file is opened with
   :func:`~controller.audit.open_table_log` (continuing the table's chain from its
   previous day), with :class:`~controller.audit.AnchorSink` and the sabot history
   (:func:`~controller.audit.history.history_settings`) in the session settings.
3. The :class:`~controller.app.runtime.TableRuntime` runs the devices (each under a
   supervisor that reconnects it; faults the recovered engine still has open are given
   back to the drivers) and the engine thread; the **dealer console**
   (:mod:`controller.app.console`) reads commands from stdin, one per line. After every
   input the console shows the input, the state, the card counts and each deviation, and
   the next step when the state changes.
4. End of input (or ``quit``, or Ctrl-C) stops the controller; the log is closed (anchor
   ``close``). Exit 0; 1 if a deviation of severity warning or critical appeared in this
   run; 2 bad config or a refused log; 3 the controller stopped on an error.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from controller import jsontext
from controller.app.console import MAX_LINE, Command, CommandKind, DealerConsole
from controller.app.runtime import TableRuntime
from controller.app.tableconfig import TableConfig, TableConfigError, load_table_config
from controller.audit import (
    AnchorSink,
    AuditLog,
    AuditLogError,
    KeyFileError,
    load_key,
    open_table_log,
    parse_log_name,
    table_files,
)
from controller.audit.history import history_settings
from controller.audit.lock import LogInUseError, hold_table
from controller.audit.modes import make_dirs
from controller.audit.records import LogReadError
from controller.audit.recovery import RecoveryResult, recover
from controller.audit.replay import ReplayError
from controller.deviations import Deviation, Severity
from controller.events import Event
from controller.jsontext import JsonTextError
from controller.outputs import Note, Output, Prompt
from controller.session import TableSession
from drivers.diagnostics import utc_now
from drivers.errors import DeviceError
from drivers.registry import create_drivers

log = logging.getLogger("shoewarden.run")
EXIT_OK, EXIT_DEVIATION, EXIT_BAD_INPUT, EXIT_FAILED = 0, 1, 2, 3
RECOVERY_REASON = "controller restart (shoewarden run): session rebuilt from the log"


class RunError(Exception):
    def __init__(self, message: str, code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code


def describe(event: Event) -> str:
    rec = event.to_record()
    rec.pop("type")
    rec.pop("t", None)
    if event.type == "deck_check":
        return f"deck_check {len(rec['cards'])} card(s)"
    text = " ".join(f"{k}={v}" for k, v in rec.items())
    return f"{event.type} {text}".strip()[:140]


class TableDisplay:
    """What the dealer sees; called in the engine thread after each input is logged."""

    def __init__(self, session: TableSession, out: IO[str], lock: threading.Lock) -> None:
        self.session = session
        self.out = out
        self.lock = lock
        self.severities: Counter[str] = Counter()

    def state_line(self) -> str:
        e = self.session.engine
        a = e.accounting()
        return (f"{e.state} | shoe {e.shoe}, round {e.round} | in shoe {a.in_shoe}, "
                f"dealt {a.dealt}, burned {a.burned}")

    def on_fed(self, event: Event, outputs: list[Output], line: int | None) -> None:
        lines = [f"> {describe(event)}  [{self.state_line()}]"]
        for o in outputs:
            if isinstance(o, Deviation):
                self.severities[str(o.severity)] += 1
                lines.append(f"  ! DEVIATION {o.code} [{o.severity}] {o.message} ({o.rule})")
            elif isinstance(o, Prompt):
                lines.append(f"  next: {o.text}")
            elif isinstance(o, Note) and o.kind in ("device_fault", "device_ok", "last_hand",
                                                    "burn_by_value", "device_diagnostic",
                                                    "consequence"):
                lines.append(f"  note: {o.text}")
        self.write("\n".join(lines))

    def status(self) -> None:
        e = self.session.engine
        faults = ", ".join(f"{d}:{c}" for (d, c) in e.open_faults) or "none"
        t = self.session.tally
        self.write(f"state: {self.state_line()}\n  next: {e.prompt().text}\n"
                   f"  open faults: {faults}\n  today: {t.shoes} shoe(s), {t.rounds} "
                   f"round(s), {t.cards} card(s), deviations "
                   + (", ".join(f"{k} {n}" for k, n in sorted(t.deviations.items())) or "none"))

    def write(self, text: str) -> None:
        with self.lock:
            self.out.write(text + "\n")
            self.out.flush()


def open_day_log(cfg: TableConfig, *, key: bytes | None, sink: AnchorSink | None,
                 today: dt.date, new_log_reason: str | None,
                 settings: dict[str, Any]) -> tuple[TableSession, RecoveryResult | None, str]:
    """The session for today, on the day's log: recovered, continued, or new."""
    files = table_files(cfg.log_dir, cfg.table)
    same_day = [p for p in files if (n := parse_log_name(p.name)) is not None
                and n.date == today]
    common: dict[str, Any] = {"key": key, "durability": cfg.durability, "anchors": sink}
    if same_day:
        path = same_day[-1]
        logged = _header_profile(path)
        if logged is not None and logged != cfg.profile.name:  # (before recovery writes)
            raise RunError(f"{path}: the day's log runs profile {logged}, the table config "
                           f"{cfg.path} says profile = {cfg.profile.name!r}; nothing was "
                           "written to the log")
        try:
            rec = recover(path, reason=RECOVERY_REASON, **common)
        except (AuditLogError, ReplayError, LogReadError) as e:
            if not new_log_reason:
                raise RunError(f"{path}: the day's log cannot be continued: {e}\n"
                               "  refusing to run the table on it; after checking it "
                               "(shoewarden audit verify), start a new log file with "
                               "--new-log-reason TEXT") from e
            audit = open_table_log(cfg.log_dir, cfg.table, today, new_log_reason=new_log_reason,
                                   **common)
            return _new_session(cfg, audit, settings), None, \
                f"{path.name} does not verify ({e}); new log {Path(audit.writer.name).name} " \
                f"started: {new_log_reason}"
        session = rec.session
        if session is None:
            session = _new_session(cfg, rec.log, settings)
        elif session.profile.name != cfg.profile.name:
            rec.log.close()
            raise RunError(f"{path}: the day's log runs profile {session.profile.name}, the "
                           f"table config says {cfg.profile.name}")
        return session, rec, ""
    if files and not _whole(files[-1]):  # yesterday's log ends in a torn line: recover it
        try:
            recover(files[-1], reason=RECOVERY_REASON, **common).log.close()
        except (AuditLogError, ReplayError, LogReadError) as e:
            if not new_log_reason:
                raise RunError(f"{files[-1]}: the previous log cannot be recovered: {e}; "
                               "start a new chain with --new-log-reason TEXT") from e
    try:
        audit = open_table_log(cfg.log_dir, cfg.table, today, **common)
        note = ""
    except AuditLogError as e:
        if not new_log_reason:
            raise RunError(f"{e}\n  refusing to start today's log; start a new chain with "
                           "--new-log-reason TEXT") from e
        audit = open_table_log(cfg.log_dir, cfg.table, today, new_log_reason=new_log_reason,
                               **common)
        note = f"new chain started: {new_log_reason}"
    settings.update(history_settings(cfg.log_dir, cfg.table, today))
    return _new_session(cfg, audit, settings), None, note


def _console_line(stdin: IO[str]) -> str:
    """One console line, read at most :data:`MAX_LINE` + 1 characters at a time: a line
    longer than that is its first part (refused by the console as too long) and the rest is
    read and dropped up to its newline — a 200 MB line without one grew the controller by
    as much before it was refused (a review)."""
    line = stdin.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE and not line.endswith("\n"):
        rest = line
        while rest and not rest.endswith("\n"):
            rest = stdin.readline(1 << 16)
    return line


def _header_profile(path: Path) -> str | None:
    """The profile the log's first record (its header) names, if it reads: asked before the
    log is recovered, so that a table config naming another profile is refused before a
    recovery record is written (a review: one was appended at every refused start)."""
    try:
        with open(path, "rb") as f:
            first = jsontext.loads(f.readline(1 << 20))
    except (OSError, JsonTextError):
        return None
    profile = first.get("profile") if isinstance(first, dict) and \
        first.get("kind") == "header" else None
    name = profile.get("name") if isinstance(profile, dict) else None
    return name if isinstance(name, str) else None


def _whole(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            if f.tell() == 0:
                return True
            f.seek(-1, 2)
            return f.read(1) == b"\n"
    except OSError:
        return True


def _new_session(cfg: TableConfig, audit: AuditLog, settings: dict[str, Any]) -> TableSession:
    session = TableSession(cfg.profile, audit, settings)
    session.start(cfg.table)
    return session


def run_table(config_path: str, *, stdin: IO[str], out: IO[str], err: IO[str],
              new_log_reason: str | None = None, today: dt.date | None = None,
              utc: Callable[[], str] = utc_now, display: str | None = None,
              publish: Any = None, witness: Any = None) -> int:
    """``publish``: the parsed ``--publish`` options (``floor.forward.connection_from``);
    ``witness``: the options carrying ``--witness-from`` (``controller.app.witness_in``)."""
    try:
        cfg = load_table_config(config_path)
    except TableConfigError as e:
        err.write(f"shoewarden run: {e}\n")
        return EXIT_BAD_INPUT
    try:
        key = load_key(cfg.key_file).key if cfg.key_file is not None else None
        drivers = create_drivers(cfg.drivers_config())
    except KeyFileError as e:  # (named by the config file and its key: a review)
        err.write(f"shoewarden run: {cfg.path}: key_file: {e}\n")
        return EXIT_BAD_INPUT
    except (ValueError, DeviceError) as e:
        err.write(f"shoewarden run: {config_path}: {e}\n")
        return EXIT_BAD_INPUT
    today = today or dt.datetime.now(dt.UTC).date()
    settings: dict[str, Any] = {"command": "run", "table_config": str(cfg.path),
                                "durability": cfg.durability}
    try:
        hold = hold_table(cfg.log_dir / cfg.table)  # one controller per table
    except LogInUseError as e:
        err.write(f"shoewarden run: {e}\n")
        return EXIT_BAD_INPUT
    except OSError as e:
        err.write(f"shoewarden run: {cfg.path}: log_dir {cfg.log_dir}: cannot use the log "
                  f"directory: {e.strerror or e}\n")
        return EXIT_BAD_INPUT
    with hold:
        return _run_held(cfg, key, drivers, today, settings, stdin=stdin, out=out, err=err,
                         new_log_reason=new_log_reason, utc=utc, display=display,
                         publish=publish, witness=witness)


def _run_held(cfg: TableConfig, key: bytes | None, drivers: Any, today: dt.date,
              settings: dict[str, Any], *, stdin: IO[str], out: IO[str], err: IO[str],
              new_log_reason: str | None, utc: Callable[[], str],
              display: str | None = None, publish: Any = None, witness: Any = None) -> int:
    """``run`` once the table is held."""
    try:
        make_dirs(cfg.log_dir)
        sink = None
        if cfg.anchors is not None or cfg.anchors_syslog:
            if cfg.anchors is not None:
                make_dirs(cfg.anchors.parent)
            sink = AnchorSink(cfg.anchors, syslog=cfg.anchors_syslog)
        session, recovered, note = open_day_log(cfg, key=key, sink=sink, today=today,
                                                new_log_reason=new_log_reason,
                                                settings=settings)
    except RunError as e:
        err.write(f"shoewarden run: {e}\n")
        return e.code
    except (AuditLogError, OSError) as e:
        err.write(f"shoewarden run: {cfg.log_dir}: cannot open the audit log: {e}\n")
        return EXIT_BAD_INPUT

    shown = None
    if display is not None:  # the dealer display, served here, reading this table's log
        from floor.display import DisplayError, display_for_log

        assert session.audit is not None
        try:
            shown = display_for_log(session.audit.writer.name, display)
        except DisplayError as e:
            session.close()
            err.write(f"shoewarden run: {e}\n")
            return EXIT_BAD_INPUT
    fwd = None
    if publish is not None:  # the forwarder: this table's log to NATS, a child process
        from floor.forward import ForwardError
        from floor.forward_process import forwarder_process_for_log

        def say(line: str) -> None:
            err.write(f"shoewarden run: {line}\n")
            err.flush()

        assert session.audit is not None
        try:
            fwd = forwarder_process_for_log(session.audit.writer.name, publish, say=say)
        except ForwardError as e:
            if shown is not None:
                shown.stop()
            session.close()
            err.write(f"shoewarden run: {e}\n")
            return EXIT_BAD_INPUT
    try:
        return _serve_table(cfg, session, recovered, note, drivers, stdin=stdin, out=out,
                            err=err, utc=utc, shown=shown, witness=witness)
    finally:
        if shown is not None:
            shown.stop()
        if fwd is not None:
            out.write(f"{fwd.finish()}\n")


def _serve_table(cfg: TableConfig, session: TableSession, recovered: Any, note: str | None,
                 drivers: Any, *, stdin: IO[str], out: IO[str], err: IO[str],
                 utc: Callable[[], str], shown: Any, witness: Any = None) -> int:
    lock = threading.Lock()
    display = TableDisplay(session, out, lock)
    assert session.audit is not None
    if shown is not None:
        display.write(f"dealer display at {shown.url}")
    display.write(f"shoewarden run: table {cfg.table}, profile {session.profile.name}, log "
                  f"{session.audit.writer.name}")
    if note:
        display.write(f"  {note}")
    if recovered is not None:
        display.write(f"recovered: {recovered.summary().split(': recovered: ', 1)[-1]}")
    display.status()
    display.write("type ? for the commands")
    restore: dict[str, list[str]] = {}
    for (device, code) in session.engine.open_faults:
        restore.setdefault(device, []).append(code)
    runtime = TableRuntime(session, devices=drivers,
                           driver_names={n: str(c.get("driver")) for n, c in cfg.devices.items()},
                           on_fed=display.on_fed, restore_faults=restore, utc=utc)
    console = DealerConsole(session.profile, cfg.table, cfg.decks, clock=utc)
    from controller.app.witness_in import listen

    witness_in = listen(session.audit.writer.name, witness, runtime) if witness else None

    def ask(question: str) -> str | None:
        with lock:
            out.write(question)
            out.flush()
        answer = _console_line(stdin)
        return answer if answer else None

    console_failed: list[str] = []

    def read_console() -> None:
        try:
            while True:
                line = _console_line(stdin)
                if not line:
                    runtime.request_stop("end of the dealer console's input")
                    return
                try:
                    cmd: Command = console.parse(line, ask)
                except Exception as e:  # a line the console could not read: refuse it only
                    log.exception("console line refused")
                    cmd = Command(CommandKind.ERROR, message=f"that line could not be read "
                                  f"({type(e).__name__}); nothing was done")
                if cmd.kind == CommandKind.EVENT:
                    assert cmd.event is not None
                    runtime.post_event(cmd.event)
                elif cmd.kind == CommandKind.CLEAR:
                    runtime.clear_fault(cmd.device, cmd.code)
                elif cmd.kind == CommandKind.STATUS:
                    runtime.post_call(display.status)
                elif cmd.kind == CommandKind.HELP:
                    display.write(cmd.message)
                elif cmd.kind == CommandKind.QUIT:
                    runtime.request_stop("quit")
                    return
                else:
                    display.write(f"  ? {cmd.message}")
        except Exception as e:  # never silently: the table cannot go on without its console
            console_failed.append(f"{type(e).__name__}: {e}")
            runtime.request_stop(f"the dealer console failed: {type(e).__name__}: {e}")

    runtime.start()
    threading.Thread(target=read_console, name="dealer-console", daemon=True).start()
    interrupted = False
    try:
        while not runtime.wait(0.2):
            pass
    except KeyboardInterrupt:
        interrupted = True
        runtime.request_stop("interrupted")
        runtime.wait(10)
    runtime.join(10)
    if witness_in is not None:
        witness_in.stop()
    try:
        session.close()
    except (AuditLogError, OSError) as e:
        display.write(f"the audit log could not be closed cleanly: {e}; it verifies up to its "
                      "last whole record")
    t = session.tally
    display.write(f"stopped ({runtime.error or runtime.stop_reason}): {t.shoes} shoe(s), "
                  f"{t.rounds} round(s), {t.cards} card(s) today; state "
                  f"{session.engine.state}; log {session.audit.writer.name}")
    if runtime.error is not None:
        err.write(f"shoewarden run: the controller stopped on an error: {runtime.error}\n")
        return EXIT_FAILED
    if console_failed:
        err.write(f"shoewarden run: the dealer console failed: {console_failed[0]}\n")
        return EXIT_FAILED
    if interrupted:
        return 130
    worst = display.severities
    return EXIT_DEVIATION if worst[Severity.WARNING] or worst[Severity.CRITICAL] else EXIT_OK


def cmd_run(args: Any) -> int:
    if isinstance(sys.stdin, io.TextIOWrapper):
        # a byte that is not UTF-8 must cost its line, not the console: keep it escaped, and
        # the console refuses the line (DealerConsole.parse)
        sys.stdin.reconfigure(errors="surrogateescape")
    publish = None
    if (getattr(args, "publish", None) or getattr(args, "witness_from", None)
            or getattr(args, "witness_public", None)):
        from controller.app.witness_in import public_key_of
        from floor.forward import ForwardError, connection_from

        try:
            connection = connection_from(args)  # checks every URL and file first
            public_key_of(args)
        except ForwardError as e:
            print(f"shoewarden run: {e}", file=sys.stderr)
            return EXIT_BAD_INPUT
        publish = connection if getattr(args, "publish", None) else None
    return run_table(args.table, stdin=sys.stdin, out=sys.stdout, err=sys.stderr,
                     new_log_reason=args.new_log_reason, display=getattr(args, "display", None),
                     publish=publish,
                     witness=args if getattr(args, "witness_from", None) else None)
