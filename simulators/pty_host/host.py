"""The simulated devices of one table on real ptys, served by one ``select()`` loop.

:class:`PtyHost` ties the pieces of the package together: the device models and the
:class:`~simulators.pty_host.player.TablePlayer` that plays the day through them, one
:class:`~simulators.pty_host.ptys.PtyLink` per device, the
:class:`~simulators.pty_host.console.ConsoleChannel`. Its loop moves the bytes (never
running ahead of a controller that is behind), unplugs and replugs links for
``disconnect`` faults, and plays the next step once every device was greeted and a
console reader is there. In a child process (:mod:`simulators.pty_host.cli`) or a thread
(``start()`` / ``stop()``, for tests).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.profiles import Profile, load_profile
from simulators.dealer import DayPlan, table_day
from simulators.pty_host.console import ConsoleChannel
from simulators.pty_host.linkdirs import LINK_DIR_PREFIX, sweep_stale_link_dirs
from simulators.pty_host.player import TablePlayer, make_devices
from simulators.pty_host.ptys import PtyLink, PtyLinkState
from simulators.scenario import Scenario, load_scenario

BURST = 32  # event frames a device sends per tick at most


class PtyHost:
    """The simulated devices of one table on real ptys, playing one table day.

    ``PtyHost(profile, seed, scenario=...)``; ``start()`` opens the ptys and the console
    FIFO and serves from a thread; ``ports`` maps device names (and ``console``) to paths;
    ``stop()`` closes everything. ``done`` is set once the whole day was played.
    """

    def __init__(self, profile: Profile | str, seed: int | None = None, *,
                 plan: DayPlan | None = None, scenario: Scenario | str | None = None,
                 pace: float | None = None, shuffler: str | None = None,
                 link_dir: str | Path | None = None, wait_for_hello: bool = True,
                 wait_for_console: bool = True, clock: Callable[[], float] = time.monotonic,
                 log: Callable[[str], None] | None = None, manual: bool = False,
                 parent_pid: int | None = None) -> None:
        if isinstance(scenario, str):
            scenario = load_scenario(scenario)
        if isinstance(profile, str):
            profile = load_profile(profile)
        self.scenario = scenario
        self.profile = profile
        if seed is None and scenario is not None:
            seed = scenario.seed
        self.seed_given = seed is not None
        self.seed = seed if seed is not None else secrets.randbits(31)
        host = dict(scenario.host) if scenario else {}
        self.pace = pace if pace is not None else host.get("pace", 0.0)
        shuffler = shuffler or host.get("shuffler", "auto")
        if scenario is not None:
            self.steps = scenario.steps(profile, self.seed, plan)
        else:
            self.steps = table_day(profile, self.seed, plan)
        self.devices = make_devices(profile, seed=self.seed if self.seed_given else None,
                                    scenario=scenario, shuffler=shuffler)
        self._identities = {n: d.identity for n, d in self.devices.items()}
        self.player = TablePlayer(profile, self.steps, self.devices)
        self.wait_for_hello = wait_for_hello
        self.wait_for_console = wait_for_console
        self.clock = clock
        self.log = log or (lambda _msg: None)
        self._own_dir = link_dir is None
        self.link_dir = Path(link_dir) if link_dir else None
        self.links: dict[str, PtyLink] = {}
        self.ports: dict[str, str] = {}
        self.console = ConsoleChannel()
        self._greeted: set[str] = set()
        self._stop = threading.Event()
        self.done = threading.Event()
        self.playing = threading.Event()
        self._thread: threading.Thread | None = None
        self._wake_r = self._wake_w = -1
        self._t0 = 0.0
        self._next_step = 0.0
        self._done_at: float | None = None
        #: manual mode: a step is played only for each :meth:`step` permit (tests drive a
        #: controller's dealer console in between)
        self.manual = manual
        self._permits = 0
        self._permit_lock = threading.Lock()
        #: exit when this process is no longer our parent (``--exit-with-parent``)
        self.parent_pid = parent_pid

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> dict[str, str]:
        """Create the ptys, the symlinks and the console FIFO; returns :attr:`ports`."""
        if self.link_dir is None:
            sweep_stale_link_dirs()
            self.link_dir = Path(tempfile.mkdtemp(prefix=LINK_DIR_PREFIX))
            # written whole, then renamed: a sweep (or a test) reading it never sees it
            # empty (a test's race: read between its creation and its write)
            (self.link_dir / "pid.tmp").write_text(f"{os.getpid()}\n")
            os.replace(self.link_dir / "pid.tmp", self.link_dir / "pid")
        self.link_dir.mkdir(parents=True, exist_ok=True)
        self._t0 = self.clock()
        for name in self.devices:
            link = PtyLink(name, str(self.link_dir / name))
            self.links[name] = link
            link.up()
            self.ports[name] = link.path
        self.ports["console"] = self.console.create(self.link_dir / "console")
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        return dict(self.ports)

    def start(self) -> PtyHost:
        self.open()
        self._thread = threading.Thread(target=self.serve, name="pty-host", daemon=True)
        self._thread.start()
        return self

    def step(self, n: int = 1) -> None:
        """Manual mode: allow ``n`` more steps of the day to be played (thread-safe)."""
        with self._permit_lock:
            self._permits += n
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"s")

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def request_stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def stop(self, timeout: float = 5.0) -> None:
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.close()

    def close(self) -> None:
        for link in self.links.values():
            link.down()
        self.console.close()
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._wake_r = self._wake_w = -1
        if self.link_dir is not None:
            with contextlib.suppress(FileNotFoundError):
                (self.link_dir / "console").unlink()
            if self._own_dir:
                shutil.rmtree(self.link_dir, ignore_errors=True)

    def __enter__(self) -> PtyHost:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def now(self) -> float:
        return self.clock() - self._t0

    # ------------------------------------------------------------------ links

    def _maintain(self, now: float) -> None:
        for name, link in self.links.items():
            dev = self.devices[name]
            if link.state == PtyLinkState.UP and dev.link_down is not None:
                link.state, link.since = PtyLinkState.DRAINING, now
            if link.state == PtyLinkState.DRAINING:
                # everything written was read: the outbox is empty, the pty holds nothing
                # (the kernel moves written bytes to the reader's queue asynchronously, so
                # the queue must stay empty for a moment after the last write)
                flushed = (not link.outbox and link.unread() == 0
                           and now - link.last_write >= 0.05)
                if flushed or now - link.since > 2.0:
                    link.down()
                    link.up_at = now + (dev.link_down or 0.0)
                    self.console.write(self.player.line(note="link", device=name, state="down"))
                    self.log(f"{name}: disconnected")
            elif link.state == PtyLinkState.DOWN and now >= link.up_at:
                link.up()
                dev.link_reset()
                self.console.write(self.player.line(note="link", device=name, state="up",
                                               pts=link.pts))
                self.log(f"{name}: reconnected on {link.pts}")

    @property
    def console_lines(self) -> list[dict[str, Any]]:
        """Every console line written so far."""
        return self.console.lines

    # ------------------------------------------------------------------ the loop

    def _ready_to_play(self) -> bool:
        if self.wait_for_hello and self._greeted != set(self.devices):
            return False
        return not (self.wait_for_console and not self.console.connected)

    def _play(self, now: float) -> None:
        if self.player.done or not self._ready_to_play():
            return
        if not self.playing.is_set():
            self.playing.set()
            self._next_step = now
        budget = 64
        while not self.player.done and now >= self._next_step and budget:
            if self.manual:
                with self._permit_lock:
                    if not self._permits:
                        break
                    self._permits -= 1
            for line in self.player.play_next():
                self.console.write(line)
            self._next_step = (self._next_step + self.pace) if self.pace else now
            if self.pace and self._next_step < now - 1.0:
                self._next_step = now  # do not rush to catch up after a stall
            budget -= 1
        if self.player.done and not self.done.is_set():
            self._done_at = now
            self.done.set()

    def serve(self, exit_after: float | None = None) -> None:
        """Run until :meth:`request_stop` (or ``exit_after`` seconds after the day ended)."""
        try:
            while not self._stop.is_set():
                now = self.now()
                self._maintain(now)
                self.console.flush()
                self._play(now)
                for name, dev in self.devices.items():
                    link = self.links[name]
                    if link.state != PtyLinkState.UP:
                        dev.tick(now)  # time passes for a device that is unplugged
                        continue
                    if link.outbox or link.unread() > 4096:
                        continue  # the controller is behind: do not run ahead of it
                    link.outbox += dev.tick(now, limit=BURST)
                    if dev.greeted:
                        self._greeted.add(name)
                for line in self.player.notes():
                    self.console.write(line)
                self.console.flush()
                if (exit_after is not None and self._done_at is not None
                        and now - self._done_at >= exit_after):
                    break
                if self.parent_pid is not None and os.getppid() != self.parent_pid:
                    self.log("the controller that started us is gone: exiting")
                    break
                ups = [lk for lk in self.links.values() if lk.state == PtyLinkState.UP]
                rl = [lk.master for lk in ups] + [self._wake_r]
                wl = [lk.master for lk in ups if lk.outbox]
                console_fd = self.console.pending_fd()
                if console_fd is not None:
                    wl.append(console_fd)
                try:
                    readable, writable, _ = select.select(rl, wl, [], 0.005)
                except InterruptedError:
                    continue
                now = self.now()
                for link in ups:
                    if link.master in readable:
                        self._read(link, now)
                    if link.master in writable and link.state == PtyLinkState.UP:
                        try:
                            n = os.write(link.master, link.outbox)
                            del link.outbox[:n]
                            link.last_write = now
                        except (BlockingIOError, InterruptedError):
                            pass
                        except OSError:
                            link.outbox.clear()
                if self._wake_r in readable:
                    with contextlib.suppress(OSError):
                        os.read(self._wake_r, 64)
        finally:
            self._stop.set()

    def _read(self, link: PtyLink, now: float) -> None:
        try:
            data = os.read(link.master, 65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # EIO: no one holds the slave (cannot happen while we hold it)
            return
        if data:
            self.devices[link.name].receive(data, now)

    # ------------------------------------------------------------------ results

    def allowlist(self) -> list[dict[str, str]]:
        """``[[allowlist]]`` entries for the devices as configured (a ``wrong_identity``
        fault then reports something that is not on it)."""
        return [{"kind": i.kind, "model": i.model, "serial": i.serial, "firmware": i.firmware,
                 "firmware_hash": i.firmware_hash} for i in self._identities.values()]

    @property
    def dealt(self) -> dict[str, list[str]]:
        """The cards each device actually dealt, in order."""
        return self.player.dealt
