"""Setting a bench day up: its profile, scenario, seed and plan, and its audit log, new or resumed.

:func:`prepare` does everything a run needs before the simulated table starts, and
refuses bad input (:class:`~controller.app.bench.options.BenchError`, exit 2) before any
device or child process exists. It leaves the table's log held (one writer per table)
and the session open; the runner releases them whatever happens next.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import secrets
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from controller.app.bench.logfacts import first_header, read_log_facts
from controller.app.bench.options import PLAN_KEYS, BenchError, BenchOptions
from controller.app.bench.seeds import seed_nonce
from controller.app.runtime import CONTROLLER, CONTROLLER_ERROR, LINK_CODES
from controller.audit import (
    DURABILITY_POLICIES,
    AnchorSink,
    AuditLog,
    AuditLogError,
    log_path,
    open_table_log,
    parse_log_name,
    table_files,
)
from controller.audit.anchors import anchor_file_problem
from controller.audit.files import check_table_id
from controller.audit.history import history_settings
from controller.audit.lock import LogInUseError, TableHold, hold_table
from controller.audit.modes import make_dirs
from controller.audit.records import LogReadError
from controller.audit.recovery import recover
from controller.audit.replay import ReplayError
from controller.audit.seeds import seed_commitment
from controller.audit.sets import not_a_log
from controller.events import parse_time
from controller.profiles import Profile, ProfileError, load_profile
from controller.session import TableSession
from simulators.dealer import DayPlan
from simulators.pty_host import PtyHost
from simulators.scenario import Scenario, ScenarioError, load_scenario


@dataclass
class BenchDay:
    """Everything :func:`prepare` settled: what is dealt, by which seed, into which log."""

    profile: Profile
    profile_arg: str  # as given (a name or a file): the child process loads the same
    scenario: Scenario | None
    seed: int
    plan: DayPlan
    day: PtyHost  # the day's steps and devices, as the child process will play them
    opening: dict[str, Any]  # the table_open step's event
    dealer: str  # the device that deals the cards: "shoe", or "shuffler" (continuous)
    path: Path  # the log file
    hold: TableHold  # the table's lock (released by the runner)
    nonce: str
    session: TableSession
    skip: int = 0  # scripted inputs already in a resumed log
    restore: dict[str, list[str]] = field(default_factory=dict)  # link faults still open
    clear_controller: bool = False  # a resumed log left a CONTROLLER_ERROR open

    @property
    def scenario_name(self) -> str | None:
        return self.scenario.name if self.scenario is not None else None


def _plan(scenario: Scenario | None, opts: BenchOptions) -> DayPlan:
    plan = scenario.day_plan(DayPlan()) if scenario is not None else DayPlan()
    if opts.shoes is not None:
        if not 1 <= opts.shoes <= 50:
            raise BenchError(f"--shoes: {opts.shoes} is out of range 1..50")
        plan.shoes = opts.shoes
    if opts.rounds_per_block is not None:
        if not 1 <= opts.rounds_per_block <= 1000:
            raise BenchError(f"--rounds-per-block: {opts.rounds_per_block} is out of range "
                             "1..1000")
        plan.rounds_per_block = opts.rounds_per_block
    if opts.table is not None:
        try:
            check_table_id(opts.table)
        except ValueError as e:
            raise BenchError(f"--table: {e}") from None
        plan.table = opts.table
    return plan


def _settings(profile: Profile, seed: int, nonce: str, scenario: Scenario | None,
              plan: DayPlan, opts: BenchOptions) -> dict[str, Any]:
    return {"command": "bench", "bench_profile": profile.name,
            "seed_commitment": seed_commitment(seed, nonce),
            "scenario": scenario.name if scenario is not None else None,
            "plan": {k: getattr(plan, k) for k in PLAN_KEYS}, "durability": opts.durability}


def _same_day(header: dict[str, Any] | None, settings: dict[str, Any]) -> str | None:
    """Why a log's header is not this bench day's (None: it is)."""
    if header is None:
        return "it has no header"
    logged = header.get("settings") or {}
    for key in ("command", "bench_profile", "seed_commitment", "scenario", "plan"):
        if logged.get(key) != settings.get(key):
            return f"its {key} is {logged.get(key)!r}, not {settings.get(key)!r}"
    return None


def _log_paths(opts: BenchOptions, table: str, date: dt.date) -> tuple[Path | None, Path, Path]:
    """The log root (None: a file was given), the log file and the anchors file."""
    if opts.log is None:
        fresh = Path(tempfile.mkdtemp(prefix="shoewarden-bench-"))
        root: Path | None = fresh
        path = log_path(fresh, table, date)
    elif opts.log.endswith(".jsonl") or Path(opts.log).is_file():
        root, path = None, Path(opts.log)
    else:
        root = Path(opts.log)
        same = [p for p in table_files(root, table)
                if (n := parse_log_name(p.name)) is not None and n.date == date]
        path = same[-1] if same else log_path(root, table, date)
    anchors_path = Path(opts.anchors) if opts.anchors else (
        (root if root is not None else path.parent) / "anchors.jsonl")
    return root, path, anchors_path


def prepare(opts: BenchOptions, out: IO[str]) -> BenchDay:
    """Check the input, hold the table's log and open (or resume) it; raises
    :class:`BenchError` for bad input or a log that cannot be used."""
    try:
        scenario = load_scenario(opts.scenario) if opts.scenario else None
    except ScenarioError as e:
        raise BenchError(str(e)) from e
    profile_arg = opts.profile or (scenario.profile if scenario is not None else None)
    if not profile_arg:
        raise BenchError("--profile is required (the scenario names no profile)")
    try:
        profile = load_profile(profile_arg)
    except ProfileError as e:
        raise BenchError(str(e)) from e
    if opts.durability not in DURABILITY_POLICIES:
        raise BenchError(f"--durability: {opts.durability!r} is not "
                         f"{', '.join(DURABILITY_POLICIES[:-1])} or {DURABILITY_POLICIES[-1]}")
    seed = opts.seed if opts.seed is not None else (
        scenario.seed if scenario is not None and scenario.seed is not None
        else secrets.randbits(31))
    plan = _plan(scenario, opts)
    try:
        day = PtyHost(profile, seed, plan=plan, scenario=scenario, pace=opts.pace)
    except ScenarioError as e:
        raise BenchError(str(e)) from e
    opening = day.steps[0].event
    table = str(opening["table"])
    date = parse_time(opening["t"]).date()
    dealer = "shuffler" if profile.shuffler_mode else "shoe"

    # ---- the audit log: new, or resumed
    root, path, anchors_path = _log_paths(opts, table, date)
    if opts.anchors and (why := anchor_file_problem(anchors_path)) is not None:
        raise BenchError(f"--anchors {why}")
    if root is None and path.is_file() and path.stat().st_size:
        with contextlib.suppress(OSError):  # (another program's file: its .seed was blamed)
            if (why := not_a_log(path)) is not None:
                raise BenchError(f"--log {path}: {why}: bench writes a new log or resumes its "
                                 "own; give a new file name or a directory")
    try:
        hold = hold_table(path.parent)  # one writer per table (a second bench is refused)
    except LogInUseError as e:
        raise BenchError(str(e)) from e
    except OSError as e:
        raise BenchError(f"{path.parent}: cannot use the log directory: "
                         f"{e.strerror or e}") from e
    try:
        nonce = seed_nonce(path, seed)
    except BenchError:
        hold.release()
        raise
    settings = _settings(profile, seed, nonce, scenario, plan, opts)
    try:
        make_dirs(anchors_path.parent)
        sink = AnchorSink(anchors_path, syslog=False)
        skip = 0
        restore: dict[str, list[str]] = {}
        clear_controller = False
        if path.exists() and path.stat().st_size > 0:
            why = _same_day(first_header(path), settings)
            if why is not None:
                raise BenchError(f"{path} holds another bench day ({why}); give another --log")
            rec = recover(path, durability=opts.durability, anchors=sink,
                          reason="bench restart: resume the simulated day")
            audit = rec.log
            session = rec.session
            if session is None:
                session = TableSession(profile, audit, settings)
                session.start(table)
            skip = max((r for r in read_log_facts(path, dealer).scripted), default=0)
            for (device, code) in session.engine.open_faults:
                if device == CONTROLLER and code == CONTROLLER_ERROR:
                    clear_controller = True
                elif code in LINK_CODES:
                    restore.setdefault(device, []).append(code)
            out.write(f"resuming {path.name}: {rec.summary().split(': recovered: ', 1)[-1]}\n"
                      f"  skipping the first {skip} scripted input(s) of the day (already "
                      "in the log)\n")
        else:
            if root is not None:
                audit = open_table_log(root, table, date, durability=opts.durability,
                                       anchors=sink)
                settings.update(history_settings(root, table, date))
            else:
                make_dirs(path.parent)
                audit = AuditLog.open(path, durability=opts.durability, anchors=sink)
            session = TableSession(profile, audit, settings)
            session.start(table)
    except (AuditLogError, LogReadError, ReplayError, OSError) as e:
        hold.release()
        raise BenchError(f"{path}: cannot use the audit log: {e}") from e
    except BaseException:
        hold.release()
        raise
    return BenchDay(profile, profile_arg, scenario, seed, plan, day, opening, dealer, path,
                    hold, nonce, session, skip, restore, clear_controller)
