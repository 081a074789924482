"""``shoewarden bench``: the controller against simulated devices on virtual serial ports.

::

    shoewarden bench --profile NAME [--shoes N] [--rounds-per-block N] [--seed S]
                     [--scenario FILE] [--log FILE|DIR] [--pace S] [--durability P]

1. The simulated table (``python -m simulators.pty_host``) starts in a **child process**:
   shoe, scanner and shuffler on ptys, the simulated dealer's console on a FIFO.
2. The controller's real drivers open those ports with pyserial exactly as they would
   open ``/dev/ttyUSB0`` (each under a :class:`~drivers.supervisor.Supervisor`); the
   console channel is read by a thread; what the drivers make and the console lines are
   put in step order by the :class:`~controller.app.sequencing.ConsoleMerger`
   (:class:`~controller.app.sequencing.BenchSequencer`) and fed by the
   :class:`~controller.app.runtime.TableRuntime`'s engine thread through the audit log.
3. A progress line per shoe (per block of ``rounds_per_block`` rounds where every round is
   shuffled, as in stud poker), each deviation as it happens, then a summary: shoes,
   rounds, cards, deviations by code, device faults, reconnects, protocol errors, and the
   **card check**: every card the simulated devices reported leaving them is in the audit
   log once, in order (no card lost, none counted twice).

Exit status: 0 the day completed, the card check holds and every deviation is one the
scenario expects (``expect``; with no scenario: none at all); 1 a deviation the scenario
did not expect, or the card check failed; 2 bad input (profile, scenario, log that holds
another day); 3 the run did not complete (the simulator died, no progress for
``--stall-timeout`` seconds, the controller stopped on an error).

**Clock.** Every event is stamped on the simulated dealer's clock: console events and the
devices' step messages carry the scripted ``t`` (the console's ``attach``); events the
script does not know (faults, diagnostics, connections) get the dealer's clock of the
moment (the last scripted ``t``). So a bench log is reproducible: same profile, seed and
scenario, same log (up to the writer's own ``ts``, and link events whose timing decides).

**Resume.** The simulated day is deterministic by seed. Each scripted input (one the day's
steps and device messages produce, in the merger's order) is logged with ``line`` = its
number in the day (1-based); events the script does not know have no ``line``. A bench
started on a log that already holds part of the same day (same profile, seed, scenario
and plan, from the header) recovers it (``controller.audit.recovery.recover``: torn tail
cut, session rebuilt), starts the simulator over, and skips every scripted input up to
the highest ``line`` in the log: the day continues from the first input not yet durable.
The link faults the rebuilt engine still has open are given back to the drivers (cleared
by the next handshake); a ``CONTROLLER_ERROR`` is cleared (``device_ok``: there is no
person at a bench). Exact for days whose device events do not depend on timing (no
``time`` trigger, no refused device).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

from controller.app.runtime import CONTROLLER, CONTROLLER_ERROR, LINK_CODES, TableRuntime
from controller.app.sequencing import BenchSequencer
from controller.audit import (
    AnchorSink,
    AuditLog,
    AuditLogError,
    log_path,
    open_table_log,
    parse_log_name,
    table_files,
)
from controller.audit.files import check_table_id
from controller.audit.history import history_settings
from controller.audit.lock import LogInUseError, hold_table
from controller.audit.modes import make_dirs
from controller.audit.records import LogReader, LogReadError
from controller.audit.recovery import recover
from controller.audit.replay import ReplayError
from controller.deviations import Deviation
from controller.events import CardDrawn, DeviceOk, Event, parse_time
from controller.outputs import Output
from controller.profiles import Profile, ProfileError, load_profile
from controller.progressbar import ProgressBar, wanted
from controller.session import TableSession
from drivers.errors import DeviceError
from drivers.registry import create_drivers
from drivers.supervisor import Backoff
from simulators.dealer import DayPlan
from simulators.pty_host import PtyHost, sweep_stale_link_dirs
from simulators.scenario import Scenario, ScenarioError, load_scenario

log = logging.getLogger("shoewarden.bench")

EXIT_OK, EXIT_DEVIATION, EXIT_BAD_INPUT, EXIT_FAILED = 0, 1, 2, 3
DRIVERS = {"shoe": "swp-shoe", "scanner": "swp-scanner", "shuffler": "swp-shuffler"}
PLAN_KEYS = ("shoes", "rounds_per_block", "decks", "dealer_changes")
BENCH_BACKOFF = Backoff(initial=0.2, factor=2.0, cap=2.0)


class BenchError(Exception):
    """Bad input for a bench run (exit 2) or a run that could not start (exit 3)."""

    def __init__(self, message: str, code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class BenchOptions:
    profile: str | None = None
    shoes: int | None = None
    rounds_per_block: int | None = None
    seed: int | None = None
    scenario: str | None = None
    log: str | None = None
    anchors: str | None = None
    pace: float | None = None
    durability: str = "input"
    stall_timeout: float = 30.0
    startup_timeout: float = 30.0
    verbose: bool = False
    table: str | None = None  # the table id written in the log (default: the day's, T1)
    no_progress: bool = False  # no bar even on a terminal (controller.progressbar)


# --------------------------------------------------------------------------- progress


class Progress:
    """The engine thread's display: a line per shoe (or block), each deviation as it comes."""

    def __init__(self, session: TableSession, out: IO[str], *, expect: Iterable[str],
                 block: int, every_round: bool) -> None:
        self.session = session
        self.out = out
        self.expect = set(expect)
        self.block = max(1, block)
        self.every_round = every_round
        self.shoe = session.engine.shoe
        self.mark = (session.tally.rounds, session.tally.cards, sum(
            session.tally.deviations.values()))
        self.unit_start = self.shoe
        self.first_card: float | None = None  # when the first card was fed (monotonic)

    def __call__(self, event: Event, outputs: list[Output], line: int | None) -> None:
        if self.first_card is None and isinstance(event, CardDrawn):
            self.first_card = time.monotonic()
        for o in outputs:
            if isinstance(o, Deviation):
                tag = " (expected)" if o.code in self.expect else ""
                where = f"input {line}" if line is not None else event.type
                self.out.write(f"  ! {where}: {o.code} [{o.severity}] {o.message} "
                               f"({o.rule}){tag}\n")
        shoe = self.session.engine.shoe
        if shoe != self.shoe:
            if not self.every_round or (shoe - 1) % self.block == 0:
                self._line(self.shoe)
            self.shoe = shoe

    def _line(self, upto: int) -> None:
        t = self.session.tally
        rounds, cards, devs = (t.rounds - self.mark[0], t.cards - self.mark[1],
                               sum(t.deviations.values()) - self.mark[2])
        if upto <= 0 and not cards:
            return
        if self.every_round:
            first = self.unit_start if self.unit_start > 0 else 1
            what = f"block {(upto - 1) // self.block + 1} (shuffles {first}-{upto})"
        else:
            what = f"shoe {upto}"
        self.out.write(f"{what}: {rounds} round(s), {cards} card(s), {devs} deviation(s)\n")
        self.out.flush()
        self.mark = (t.rounds, t.cards, sum(t.deviations.values()))
        self.unit_start = upto + 1

    def finish(self) -> None:
        t = self.session.tally
        if (t.rounds, t.cards) != self.mark[:2]:
            self._line(self.session.engine.shoe)


# --------------------------------------------------------------------------- the child


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


# --------------------------------------------------------------------------- the log


@dataclass
class LogFacts:
    """What the finished audit log says (the summary is the log's, not the memory's)."""

    cards: list[str] = field(default_factory=list)  # the dealing device's cards, "??" unread
    deviations: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    reconnects: Counter[str] = field(default_factory=Counter)
    protocol_errors: Counter[str] = field(default_factory=Counter)
    recoveries: int = 0
    scripted: list[int] = field(default_factory=list)  # the `line` of each scripted input
    inputs: int = 0


def read_log_facts(path: Path, dealer: str) -> LogFacts:
    facts = LogFacts()
    seen: set[str] = set()
    for rec in LogReader([path]):
        r = rec.record
        if rec.kind == "recovery":
            facts.recoveries += 1
            seen.clear()
        elif rec.kind == "input":
            facts.inputs += 1
            ev = r.get("event") or {}
            kind = ev.get("type")
            if isinstance(r.get("line"), int):
                facts.scripted.append(r["line"])
            if kind == "card":
                facts.cards.append(cast(str, ev.get("card")))
            elif kind == "device_fault":
                facts.faults[f"{ev.get('device')}:{ev.get('code')}"] += 1
                if ev.get("code") == "UNREADABLE_CARD" and ev.get("device") == dealer:
                    facts.cards.append("??")
            elif kind == "device_connected":
                dev = str(ev.get("device"))
                if dev in seen:
                    facts.reconnects[dev] += 1
                seen.add(dev)
            elif kind == "device_diagnostic" and ev.get("code") == "PROTOCOL_ERROR":
                facts.protocol_errors[f"{ev.get('device')} {ev.get('kind')}"] += ev.get(
                    "count") or 1
        elif rec.kind == "output":
            out = r.get("output") or {}
            if out.get("type") == "deviation":
                facts.deviations[str(out.get("code"))] += 1
    return facts


def _first_header(path: Path) -> dict[str, Any] | None:
    with contextlib.suppress(LogReadError):
        for rec in LogReader([path]):
            if rec.kind == "header":
                return rec.record
    return None


# --------------------------------------------------------------------------- the run


@dataclass
class BenchResult:
    code: int
    profile: str
    seed: int
    scenario: str | None
    log: Path | None = None
    facts: LogFacts | None = None
    sim_cards: list[str] | None = None
    card_check: bool | None = None
    unexpected: list[str] = field(default_factory=list)
    failure: str | None = None
    resumed_at: int = 0
    shoes: int = 0
    rounds: int = 0
    cards: int = 0
    events: int = 0
    elapsed: float = 0.0
    fed_cards: int = 0
    #: seconds from the start of the run to the first card fed (None: no card)
    first_card_s: float | None = None


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


def seed_commitment(seed: int, nonce: str) -> str:
    """The commitment to a bench day's seed written in its log's header: every card of the
    day follows from the seed, so the log holds only this hash until the day is over (then
    a ``seed_reveal`` record gives seed and nonce, and anyone can check them against it)."""
    return "sha256:" + hashlib.sha256(f"{nonce}:{seed}".encode()).hexdigest()


def seed_file(log: Path) -> Path:
    """Where the seed and nonce of a bench log are kept until the day is over (0600)."""
    return log.with_name(log.name + ".seed")


def _seed_nonce(log: Path, seed: int) -> str:
    """The nonce of this bench day: the one in ``<log>.seed`` when the log is resumed (the
    same day: the same seed), else a new one, written there first."""
    keep = seed_file(log)
    if log.exists() and log.stat().st_size > 0:
        try:
            kept = json.loads(keep.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BenchError(f"{keep}: missing: the log's seed commitment cannot be checked, so "
                             "this log cannot be resumed; give another --log") from None
        except (OSError, ValueError) as e:
            raise BenchError(f"{keep}: unreadable: {e}") from None
        if not isinstance(kept, dict) or kept.get("seed") != seed \
                or not isinstance(kept.get("nonce"), str):
            raise BenchError(f"{log} holds another bench day (its seed is not {seed}); give "
                             "another --log")
        return str(kept["nonce"])
    nonce = secrets.token_hex(16)
    make_dirs(log.parent)
    fd = os.open(keep, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, json.dumps({"seed": seed, "nonce": nonce,
                                 "commitment": seed_commitment(seed, nonce)}).encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return nonce


def _settings(profile: Profile, seed: int, nonce: str, scenario: Scenario | None,
              plan: DayPlan, opts: BenchOptions) -> dict[str, Any]:
    return {"command": "bench", "bench_profile": profile.name,
            "seed_commitment": seed_commitment(seed, nonce),
            "scenario": scenario.name if scenario is not None else None,
            "plan": {k: getattr(plan, k) for k in PLAN_KEYS}, "durability": opts.durability}


def _reveal_seed(session: TableSession, seed: int, nonce: str) -> None:
    """The day is over: every card has been dealt, so the seed may now be known. The record
    makes the day reproducible from its log alone (``seed_commitment`` in the header must be
    the hash of ``nonce:seed``)."""
    if session.audit is not None:
        session.audit.write("seed_reveal", session.engine.context(), seed=seed, nonce=nonce,
                            commitment=seed_commitment(seed, nonce))


def _same_day(header: dict[str, Any] | None, settings: dict[str, Any]) -> str | None:
    """Why a log's header is not this bench day's (None: it is)."""
    if header is None:
        return "it has no header"
    logged = header.get("settings") or {}
    for key in ("command", "bench_profile", "seed_commitment", "scenario", "plan"):
        if logged.get(key) != settings.get(key):
            return f"its {key} is {logged.get(key)!r}, not {settings.get(key)!r}"
    return None


def run_bench(opts: BenchOptions, out: IO[str] | None = None) -> BenchResult:
    """The whole bench run; raises :class:`BenchError` for bad input or a failed start."""
    begun = time.monotonic()
    out = out or sys.stdout
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
    if opts.durability not in ("input", "every", "none"):
        raise BenchError(f"--durability: {opts.durability!r} is not input, every or none")
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
    result = BenchResult(EXIT_FAILED, profile.name, seed,
                         scenario.name if scenario is not None else None)

    # ---- the audit log: new, or resumed
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
    result.log = path
    try:
        hold = hold_table(path.parent)  # one writer per table (a second bench is refused)
    except LogInUseError as e:
        raise BenchError(str(e)) from e
    except OSError as e:
        raise BenchError(f"{path.parent}: cannot use the log directory: "
                         f"{e.strerror or e}") from e
    try:
        nonce = _seed_nonce(path, seed)
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
            why = _same_day(_first_header(path), settings)
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
    result.resumed_at = skip

    # ---- the simulated table, in a child process
    argv = [sys.executable, "-m", "simulators.pty_host", "--profile", profile_arg,
            "--seed", str(seed), "--shoes", str(plan.shoes), "--rounds-per-block",
            str(plan.rounds_per_block), "--table", plan.table, "--exit-with-parent"]
    if plan.decks is not None:
        argv += ["--decks", str(plan.decks)]
    if scenario is not None:
        argv += ["--scenario", scenario.path]
    if opts.pace is not None:
        argv += ["--pace", str(opts.pace)]
    out.write(f"bench: profile {profile.name}, seed {seed}"
              + (f", scenario {scenario.name}" if scenario is not None else "")
              + f", {plan.shoes} shoe(s)"
              + (f" (blocks of {plan.rounds_per_block} rounds)"
                 if profile.shuffler_mode or profile.shuffle.every_round else "")
              + f"; {len(day.steps)} steps; log {path}\n")
    out.flush()
    sim = None
    stop_console = threading.Event()
    # a bar over the day's steps on a terminal (a day of many shoes runs for minutes);
    # the per-shoe lines print above it
    bar = ProgressBar(enabled=wanted(opts.no_progress), total=len(day.steps), unit="steps")
    try:
        bar.__enter__()
        bar.task(f"dealing {plan.shoes} shoe(s)" if not (
            profile.shuffler_mode or profile.shuffle.every_round) else
            f"dealing {plan.shoes} block(s)")
        sim = Simulator(argv, verbose=opts.verbose)
        ports = sim.ports(opts.startup_timeout)
        config = {"devices": {name: {"driver": DRIVERS[name], "port": port}
                              for name, port in ports.items() if name in DRIVERS},
                  "allowlist": day.allowlist()}
        try:
            drivers = create_drivers(config)
        except (DeviceError, ValueError) as e:
            raise BenchError(f"cannot build the drivers: {e}", EXIT_FAILED) from e
        sequencer = BenchSequencer(skip, start_t=str(opening["t"]))
        progress = Progress(session, bar.printer(out),
                            expect=scenario.expect if scenario else (),
                            block=plan.rounds_per_block,
                            every_round=profile.shuffle.every_round)
        runtime = TableRuntime(session, devices=drivers,
                               driver_names={n: DRIVERS[n] for n in drivers},
                               sequencer=sequencer, on_fed=progress,
                               stop_when=lambda: sequencer.ended, restore_faults=restore,
                               backoff=BENCH_BACKOFF)
        if clear_controller:
            runtime.post_event(DeviceOk(device=CONTROLLER, code=CONTROLLER_ERROR,
                                        detail="bench restarted"))
        console_failed: list[str] = []
        console_reader(ports["console"], runtime, stop_console, console_failed)
        started = time.monotonic()
        cards_before = session.tally.cards
        runtime.start()
        last = (-1, -1)
        last_change = time.monotonic()
        while not runtime.wait(0.1):
            now = time.monotonic()
            mark = (sequencer.ordinal, runtime.stats.fed)
            bar.update(sequencer.ordinal)
            if mark != last:
                last, last_change = mark, now
            if console_failed:
                result.failure = console_failed[0]
            elif sim.exited() is not None:
                result.failure = (f"the simulator exited (status {sim.exited()}) before the "
                                  "day ended: " + "; ".join(list(sim.stderr)[-3:]))
            elif now - last_change > opts.stall_timeout:
                result.failure = f"no progress for {opts.stall_timeout:g} s"
            if result.failure is not None:
                runtime.request_stop(result.failure)
                runtime.wait(10)
                break
        runtime.join(10)
        result.elapsed = time.monotonic() - started
        result.fed_cards = session.tally.cards - cards_before
        if runtime.error is not None:
            result.failure = f"the controller stopped on an error: {runtime.error}"
        elif result.failure is None and not sequencer.ended:
            result.failure = f"stopped before the day ended ({runtime.stop_reason})"
        if result.failure is not None and not sequencer.ended:
            waiting = sequencer.waiting_for()
            if waiting:
                result.failure += f"; waiting for {waiting}"
        progress.finish()
        if progress.first_card is not None:
            result.first_card_s = progress.first_card - begun
        result.sim_cards = (sequencer.cards or {}).get(dealer, []) if sequencer.ended else None
    finally:
        bar.__exit__(None, None, None)
        stop_console.set()
        if sim is not None:
            sim.stop()
        if result.sim_cards is not None:  # the simulated day ended: every card is out
            _reveal_seed(session, seed, nonce)
        session.close()
        hold.release()

    t = session.tally
    result.shoes, result.rounds, result.cards, result.events = t.shoes, t.rounds, t.cards, \
        t.events
    try:
        result.facts = read_log_facts(path, dealer)
    except LogReadError as e:
        result.failure = result.failure or f"cannot read the log back: {e}"
        return result
    expect = set(scenario.expect) if scenario is not None else set()
    result.unexpected = sorted(c for c in result.facts.deviations if c not in expect)
    if result.sim_cards is not None:
        result.card_check = result.facts.cards == result.sim_cards
    if result.failure is not None:
        result.code = EXIT_FAILED
    elif result.unexpected or not result.card_check:
        result.code = EXIT_DEVIATION
    else:
        result.code = EXIT_OK
    return result


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(counter.items())) if counter else "none"


def print_summary(r: BenchResult, out: IO[str]) -> None:
    f = r.facts
    out.write(f"summary: profile {r.profile}, seed {r.seed}, scenario {r.scenario or '-'}\n")
    out.write(f"  shoes {r.shoes}, rounds {r.rounds}, cards {r.cards}, inputs {r.events}"
              + (f"; {r.fed_cards} card(s) in {r.elapsed:.2f} s this run" if r.elapsed else "")
              + (f"; first card {r.first_card_s:.2f} s after the start"
                 if r.first_card_s is not None else "")
              + "\n")
    if f is not None:
        out.write(f"  deviations: {_counts(f.deviations)}\n")
        out.write(f"  device faults: {_counts(f.faults)}\n")
        out.write(f"  reconnects: {_counts(f.reconnects)}\n")
        out.write(f"  protocol errors: {_counts(f.protocol_errors)}\n")
        if f.recoveries:
            out.write(f"  resumed: {f.recoveries} time(s) after an unclean stop\n")
    if r.card_check is None:
        out.write("  card check: not done (the day did not end)\n")
    else:
        assert f is not None and r.sim_cards is not None
        unread = f.cards.count("??")
        verdict = "OK, no card lost or counted twice" if r.card_check else "FAILED"
        out.write(f"  card check: {len(r.sim_cards)} card(s) reported by the simulated "
                  f"devices, {len(f.cards)} in the audit log"
                  + (f" ({unread} unreadable, logged as UNREADABLE_CARD)" if unread else "")
                  + f": {verdict}\n")
        if not r.card_check:
            for i, (a, b) in enumerate(zip(r.sim_cards, f.cards, strict=False)):
                if a != b:
                    out.write(f"    first difference at card {i + 1}: simulator {a}, log {b}\n")
                    break
    if r.log is not None:
        out.write(f"  audit log: {r.log} (check it: shoewarden audit verify {r.log})\n")
    if r.failure is not None:
        out.write(f"result: FAILED: {r.failure}\n")
    elif r.code == EXIT_DEVIATION:
        why = []
        if r.unexpected:
            why.append("deviation(s) the scenario does not expect: " + ", ".join(r.unexpected))
        if not r.card_check:
            why.append("the card check failed")
        out.write(f"result: FAILED: {'; '.join(why)}\n")
    else:
        out.write("result: OK\n")
    out.flush()


def cmd_bench(args: Any) -> int:
    opts = BenchOptions(profile=args.profile, shoes=args.shoes,
                        rounds_per_block=args.rounds_per_block, seed=args.seed,
                        scenario=args.scenario, log=args.log, anchors=args.anchors,
                        pace=args.pace, durability=args.durability,
                        stall_timeout=args.stall_timeout, verbose=args.verbose,
                        table=args.table, no_progress=args.no_progress)
    try:
        result = run_bench(opts, sys.stdout)
    except BenchError as e:
        print(f"shoewarden bench: {e}", file=sys.stderr)
        return e.code
    print_summary(result, sys.stdout)
    return result.code
