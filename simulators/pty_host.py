"""Simulated table hardware on real ptys, driven by the simulated dealer's table day.

``python -m simulators.pty_host --profile NAME [--seed S] [--scenario FILE]`` prints one
JSON line, then serves until SIGTERM / SIGINT (exit 0)::

    {"shoe": "/tmp/shoewarden-sim-x/shoe", "scanner": ".../scanner",
     "shuffler": ".../shuffler", "console": ".../console"}

Each device path is a symlink to the pty the device is on (open it with pyserial exactly
like /dev/ttyUSB0); ``console`` is a FIFO carrying the dealer console as JSON Lines. After
a ``disconnect`` fault the symlink disappears and comes back pointing at a new pty, like a
USB serial adapter re-plugged under a stable /dev/serial/by-id name: a driver re-finds the
device by reopening the same path. :class:`PtyHost` is the same thing in-process
(``start()`` / ``stop()``, one thread running ``select()``), for tests.

The day is played once every device has been greeted (HELLO) and a console reader is
connected. :class:`TablePlayer` (pure, no I/O) maps each step of the step list:

- ``deck_check`` → the scanner scans the cards;
- ``shuffle`` → the batch shuffler (shoe and hand games) or the continuous shuffler
  shuffles; with ``--no-shuffler`` (shoe and hand games) it is a console event;
- ``card`` → the shoe draws it (shoe games; for hand-dealt games the shoe model is the card
  reader), or the continuous shuffler delivers it;
- ``cut_card`` → the shoe reports CUT_CARD_OUT; ``discards_returned`` (continuous shuffler)
  → DISCARDS_ACCEPTED;
- everything else (table_open, cut, cut_card_placed, shoe_loaded, bets_closed, action,
  stub_count, round_end, dealer_change, players_left, table_close, …) → the console.

Console lines (one per step, in step order, plus notes) — see docs/devices.md::

    {"n": 7, "step": 7, "phase": "cut", "after": {"shoe": 0, "scanner": 1, "shuffler": 1},
     "event": {"type": "cut", "offset": 120, "t": "…"}}
    {"n": 12, "step": 12, "phase": "burn", "after": {"shoe": 1, …}, "device": "shoe",
     "attach": {"t": "…"}}
    {"n": 40, "after": {…}, "note": "fault", "fault": {"kind": "jam", "device": "shoe", …}}
    {"n": 900, "after": {…}, "end": true}

``after[d]`` is the number of event messages (devices.EVENT_MESSAGES) device ``d`` had
queued when the line was written. A line's event comes after exactly those messages.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import json
import os
import random
import secrets
import select
import shutil
import signal
import struct
import sys
import tempfile
import termios
import threading
import time
import tty
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.cards import pack
from controller.profiles import Profile, load_profile
from drivers.protocol import Identity
from simulators.dealer import DayPlan, Step, table_day
from simulators.devices import (
    BatchShuffler,
    ContinuousShuffler,
    Device,
    Scanner,
    ScriptedOrder,
    Shoe,
    default_identity,
)
from simulators.scenario import Scenario, load_scenario

# event fields a device message carries; the rest of a step's event goes in "attach"
CARRIED = {"card": {"type", "card"}, "deck_check": {"type", "cards"}, "shuffle": {"type"},
           "cut_card": {"type"}, "discards_returned": {"type", "count"}}
BURST = 32  # event frames a device sends per tick at most


def make_devices(profile: Profile, *, seed: int | None = None, scenario: Scenario | None = None,
                 shuffler: str = "auto") -> dict[str, Device]:
    """The devices a table of ``profile`` has: shoe (not with a continuous shuffler), scanner,
    and a shuffler (continuous for ``card_source = "shuffler"``, else batch unless
    ``shuffler == "none"``). Each gets its scenario faults and identity overrides and, with a
    seed, its own seeded ``random.Random``."""
    classes: dict[str, type[Device]] = {}
    if profile.shuffler_mode:
        classes = {"scanner": Scanner, "shuffler": ContinuousShuffler}
    else:
        classes = {"shoe": Shoe, "scanner": Scanner}
        if shuffler != "none":
            classes["shuffler"] = BatchShuffler
    out: dict[str, Device] = {}
    for name, cls in classes.items():
        conf = dict(scenario.devices.get(name, {})) if scenario else {}
        base = default_identity(cls.model_key)
        identity = Identity(base.kind, conf.get("model") or base.model,
                            conf.get("serial") or base.serial,
                            conf.get("firmware") or base.firmware,
                            conf.get("firmware_hash") or base.firmware_hash)
        rng = random.Random(f"{seed}:{name}") if seed is not None else secrets.SystemRandom()
        out[name] = cls(identity, heartbeat=conf.get("heartbeat", 1.0), rng=rng, name=name,
                        faults=scenario.faults_for(name) if scenario else ())
    return out


def _rotate(cards: list[str], offset: int) -> list[str]:
    """The pack after a cut ``offset`` cards deep (the top ``offset`` go under)."""
    if not cards:
        return cards
    k = offset % len(cards)
    return cards[k:] + cards[:k]


class TablePlayer:
    """Plays a step list through device models (no I/O): one step per :meth:`play_next`,
    which returns the console lines to write."""

    def __init__(self, profile: Profile, steps: list[Step], devices: dict[str, Device]) -> None:
        self.profile = profile
        self.steps = steps
        self.devices = devices
        self.continuous = profile.shuffler_mode
        opens = [s.event["decks"] for s in steps if s.event["type"] == "table_open"]
        self.decks = opens[0] if opens else profile.decks.max
        self.pack = [str(c) for c in pack(self.decks)]
        self.i = 0
        self.n = 0
        self.dealt: dict[str, list[str]] = {name: [] for name in devices}
        self.mismatches: list[tuple[int, str, str | None]] = []
        self._pending: tuple[list[str], int] | None = None  # batch-shuffled pack and its cut
        self._shoe_segment: int | None = None
        self._segment_of: list[int] = []
        self._segment_cards: dict[int, list[str]] = {}
        self._index: dict[int, int] = {}  # card step -> its position in its segment
        bounds = {"shuffle", "discards_returned"} if self.continuous else {"shuffle",
                                                                            "shoe_loaded"}
        seg = -1
        for i, s in enumerate(steps):
            if s.event["type"] in bounds:
                seg = i
            self._segment_of.append(seg)
            if s.event["type"] == "card":
                cards = self._segment_cards.setdefault(seg, [])
                self._index[i] = len(cards)
                cards.append(s.event["card"])

    @property
    def done(self) -> bool:
        return self.i >= len(self.steps)

    def _complete(self, first: list[str]) -> list[str]:
        """``first``, then the rest of the pack (pack order)."""
        rest = Counter(self.pack) - Counter(first)
        tail = []
        for c in self.pack:
            if rest[c] > 0:
                tail.append(c)
                rest[c] -= 1
        return list(first) + tail

    def _cards_from(self, i: int) -> list[str]:
        """The cards of step ``i``'s segment from step ``i`` on."""
        seg = self._segment_of[i]
        cards = self._segment_cards.get(seg, [])
        if i in self._index:
            return cards[self._index[i]:]
        # a boundary step: the segment's cards are all still to come
        return cards

    def _after(self) -> dict[str, int]:
        return {name: d.events_emitted for name, d in self.devices.items()}

    def line(self, **body: Any) -> dict[str, Any]:
        out = {"n": self.n, **body}
        out.setdefault("after", self._after())
        self.n += 1
        return out

    def notes(self) -> list[dict[str, Any]]:
        """Console note lines for the faults the devices fired since the last call."""
        out = []
        for d in self.devices.values():
            for note in d.notes:
                out.append(self.line(note="fault", fault=note))
            d.notes.clear()
        return out

    def play_next(self) -> list[dict[str, Any]]:
        if self.done:
            return []
        i = self.i
        self.i += 1
        step = self.steps[i]
        ev = step.event
        kind = ev["type"]
        device = self._play(i, step)
        if device is None:
            body: dict[str, Any] = {"step": i, "phase": step.phase, "event": ev}
        else:
            body = {"step": i, "phase": step.phase, "device": device}
            attach = {k: v for k, v in ev.items() if k not in CARRIED[kind]}
            if attach:
                body["attach"] = attach
        lines = [*self.notes(), self.line(**body)]
        if self.done:
            lines.append(self.line(end=True, cards=self.cards_out()))
        return lines

    def cards_out(self) -> dict[str, list[str]]:
        """Every card each dealing device reported leaving it, in order ("??" unreadable;
        an injected foreign card included): what a controller's log must account for."""
        return {name: list(d.cards_out) for name, d in self.devices.items() if d.cards_out}

    def device_for(self, step: Step) -> str | None:
        """The device that plays ``step`` (None: the dealer console), as :meth:`_play`
        routes it — without playing it."""
        kind, d = step.event["type"], self.devices
        if kind == "deck_check" and "scanner" in d:
            return "scanner"
        if kind == "shuffle" and "shuffler" in d:
            return "shuffler"
        if kind == "card":
            return "shuffler" if self.continuous else "shoe"
        if kind == "cut_card" and "shoe" in d:
            return "shoe"
        if kind == "discards_returned" and self.continuous:
            return "shuffler"
        return None

    def _play(self, i: int, step: Step) -> str | None:
        ev = step.event
        kind = ev["type"]
        d = self.devices
        if kind == "deck_check" and "scanner" in d:
            d["scanner"].scan(ev["cards"], expected=self.decks * 52)  # type: ignore[attr-defined]
            return "scanner"
        if kind == "shuffle" and "shuffler" in d:
            sh = d["shuffler"]
            if self.continuous:
                if len(sh.stack) != len(self.pack):  # type: ignore[attr-defined]
                    sh.eject()  # type: ignore[attr-defined]
                    sh.load(self.pack)  # type: ignore[attr-defined]
                sh.shuffle(ScriptedOrder(self._complete(self._cards_from(i))))  # type: ignore
            else:
                cards, offset = self._next_shoe(i)
                n = len(self.pack)
                post = self._complete(cards)
                k = offset % n if n else 0
                pre = post[n - k:] + post[:n - k]  # so that cutting at `offset` gives `post`
                sh.eject()  # type: ignore[attr-defined]
                sh.load(self.pack)  # type: ignore[attr-defined]
                sh.shuffle(ScriptedOrder(pre))  # type: ignore[attr-defined]
                self._pending = (sh.eject(), offset)  # type: ignore[attr-defined]
            return "shuffler"
        if kind == "card":
            want = ev["card"]
            if self.continuous:
                sh = d["shuffler"]
                if not sh.stack:  # type: ignore[attr-defined]  # never shuffled (a mistake)
                    sh.load(self._complete(self._cards_from(i)))  # type: ignore
                got = sh.deliver()  # type: ignore[attr-defined]
                name = "shuffler"
            else:
                shoe = d["shoe"]
                if self._shoe_segment != self._segment_of[i]:
                    self._shoe_segment = self._segment_of[i]
                    if self._pending is not None:
                        cards, offset = self._pending
                        self._pending = None
                        shoe.load(_rotate(cards, offset))  # type: ignore[attr-defined]
                    else:
                        shoe.load(self._complete(self._cards_from(i)))  # type: ignore
                got = shoe.draw()  # type: ignore[attr-defined]
                name = "shoe"
            if got is not None:
                self.dealt[name].append(got)
            if got != want:
                self.mismatches.append((i, want, got))
            return name
        if kind == "cut_card" and "shoe" in d:
            d["shoe"].cut_card_out()  # type: ignore[attr-defined]
            return "shoe"
        if kind == "discards_returned" and self.continuous:
            d["shuffler"].accept_discards(  # type: ignore[attr-defined]
                rng=ScriptedOrder(self._complete(self._cards_from(i))))
            return "shuffler"
        return None

    def _next_shoe(self, i: int) -> tuple[list[str], int]:
        """The cards dealt between shuffle step ``i`` and the next shuffle, and the offset
        of the first cut among them (0 if none)."""
        cards: list[str] = []
        offset = None
        loaded = False
        for s in self.steps[i + 1:]:
            t = s.event["type"]
            if t == "shuffle" or (t == "shoe_loaded" and loaded):
                break  # the next shoe (its shuffle may be missing: a dealer mistake)
            loaded = loaded or t == "shoe_loaded"
            if t == "cut" and offset is None:
                offset = s.event.get("offset", 0)
            elif t == "card":
                cards.append(s.event["card"])
        return cards, offset or 0


# --------------------------------------------------------------------------- ptys


@dataclass
class _Link:
    name: str
    path: str  # the stable symlink
    master: int = -1
    slave: int = -1
    pts: str = ""
    outbox: bytearray = field(default_factory=bytearray)
    state: str = "up"  # up | draining | down
    since: float = 0.0
    up_at: float = 0.0
    generation: int = 0
    last_write: float = 0.0


def _inq(fd: int) -> int:
    """Bytes waiting to be read on a tty fd (the controller has not read them yet)."""
    try:
        buf = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
        return struct.unpack("i", buf)[0]
    except OSError:
        return 0


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
        self.links: dict[str, _Link] = {}
        self.ports: dict[str, str] = {}
        self.console_lines: list[dict[str, Any]] = []
        self._console_buf = bytearray()
        self._console_fd: int | None = None
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
            (self.link_dir / "pid").write_text(f"{os.getpid()}\n")
        self.link_dir.mkdir(parents=True, exist_ok=True)
        self._t0 = self.clock()
        for name in self.devices:
            link = _Link(name, str(self.link_dir / name))
            self.links[name] = link
            self._link_up(link)
            self.ports[name] = link.path
        console = self.link_dir / "console"
        with contextlib.suppress(FileNotFoundError):
            console.unlink()
        os.mkfifo(console)
        self.ports["console"] = str(console)
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
            self._link_down(link)
        if self._console_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._console_fd)
            self._console_fd = None
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

    def _link_up(self, link: _Link) -> None:
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo, no line editing, no CR/LF translation
        os.set_blocking(master, False)
        link.master, link.slave, link.pts = master, slave, os.ttyname(slave)
        link.outbox.clear()
        link.state = "up"
        link.generation += 1
        tmp = link.path + ".new"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        os.symlink(link.pts, tmp)
        os.replace(tmp, link.path)

    def _link_down(self, link: _Link) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(link.path)
        for fd in (link.master, link.slave):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        link.master = link.slave = -1
        link.outbox.clear()
        link.state = "down"

    def _maintain(self, now: float) -> None:
        for name, link in self.links.items():
            dev = self.devices[name]
            if link.state == "up" and dev.link_down is not None:
                link.state, link.since = "draining", now
            if link.state == "draining":
                # everything written was read: the outbox is empty, the pty holds nothing
                # (the kernel moves written bytes to the reader's queue asynchronously, so
                # the queue must stay empty for a moment after the last write)
                flushed = (not link.outbox and _inq(link.slave) == 0
                           and now - link.last_write >= 0.05)
                if flushed or now - link.since > 2.0:
                    self._link_down(link)
                    link.up_at = now + (dev.link_down or 0.0)
                    self._console(self.player.line(note="link", device=name, state="down"))
                    self.log(f"{name}: disconnected")
            elif link.state == "down" and now >= link.up_at:
                self._link_up(link)
                dev.link_reset()
                self._console(self.player.line(note="link", device=name, state="up",
                                               pts=link.pts))
                self.log(f"{name}: reconnected on {link.pts}")

    # ------------------------------------------------------------------ console

    def _console(self, line: dict[str, Any]) -> None:
        self.console_lines.append(line)
        self._console_buf += json.dumps(line, separators=(",", ":")).encode() + b"\n"

    def _console_flush(self) -> None:
        if self._console_fd is None:
            try:
                self._console_fd = os.open(self.ports["console"], os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:
                if e.errno not in (errno.ENXIO, errno.ENOENT):
                    raise
                return
        while self._console_buf:
            try:
                n = os.write(self._console_fd, self._console_buf)
            except BlockingIOError:
                return
            except BrokenPipeError:
                os.close(self._console_fd)
                self._console_fd = None
                return
            del self._console_buf[:n]

    # ------------------------------------------------------------------ the loop

    def _ready_to_play(self) -> bool:
        if self.wait_for_hello and self._greeted != set(self.devices):
            return False
        return not (self.wait_for_console and self._console_fd is None)

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
                self._console(line)
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
                self._console_flush()
                self._play(now)
                for name, dev in self.devices.items():
                    link = self.links[name]
                    if link.state != "up":
                        dev.tick(now)  # time passes for a device that is unplugged
                        continue
                    if link.outbox or _inq(link.slave) > 4096:
                        continue  # the controller is behind: do not run ahead of it
                    link.outbox += dev.tick(now, limit=BURST)
                    if dev.greeted:
                        self._greeted.add(name)
                for line in self.player.notes():
                    self._console(line)
                self._console_flush()
                if (exit_after is not None and self._done_at is not None
                        and now - self._done_at >= exit_after):
                    break
                if self.parent_pid is not None and os.getppid() != self.parent_pid:
                    self.log("the controller that started us is gone: exiting")
                    break
                ups = [lk for lk in self.links.values() if lk.state == "up"]
                rl = [lk.master for lk in ups] + [self._wake_r]
                wl = [lk.master for lk in ups if lk.outbox]
                if self._console_buf and self._console_fd is not None:
                    wl.append(self._console_fd)
                try:
                    readable, writable, _ = select.select(rl, wl, [], 0.005)
                except InterruptedError:
                    continue
                now = self.now()
                for link in ups:
                    if link.master in readable:
                        self._read(link, now)
                    if link.master in writable and link.state == "up":
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

    def _read(self, link: _Link, now: float) -> None:
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


# --------------------------------------------------------------------------- command line


LINK_DIR_PREFIX = "shoewarden-sim-"


def sweep_stale_link_dirs(tmp: str | None = None) -> list[Path]:
    """Remove the temporary link directories of pty hosts that are gone (killed: nothing
    ran their cleanup). Each holds its host's ``pid``; a directory without one, or whose
    process is alive, is left alone. Returns what was removed."""
    removed = []
    for d in Path(tmp or tempfile.gettempdir()).glob(LINK_DIR_PREFIX + "*"):
        try:
            pid = int((d / "pid").read_text().strip())
        except (OSError, ValueError):
            continue
        if _alive(pid):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def console_command(event: dict[str, Any]) -> str:
    """What a person types at ``shoewarden run``'s dealer console for a console step: the
    short command where there is one, else the event as JSON (which the console takes)."""
    kind = event["type"]
    short = {"shuffle": "s", "shoe_loaded": "l", "round_end": "e", "players_left": "x",
             "table_close": "q"}
    if kind in short:
        return short[kind]
    if kind == "table_open" and not event.get("deck_lots"):
        return f"o {event.get('decks', '')} {event.get('sabot') or ''}".rstrip()
    if kind == "cut":
        return f"c {event['offset']}"
    if kind == "cut_card_placed":
        return "p" + (f" {event['behind']}" if event.get("behind") is not None else "")
    if kind == "bets_closed" and event.get("boxes") is not None:
        return "b " + " ".join(str(b) for b in event["boxes"])
    if kind == "bets_closed" and event.get("players") is not None:
        return f"b {event['players']}"
    if kind == "stub_count":
        return f"n {event['count']}"
    if kind == "discards_returned":
        return f"r {event['count']}"
    if kind == "dealer_change":
        return f"d {event['dealer']}"
    if kind == "action" and len(event) <= 3:
        return f"a {event['action']}"
    return json.dumps({k: v for k, v in event.items() if k not in ("t", "table")})


#: seconds between the last step of one device and the first of another (--dealer person)
DEVICE_SWITCH_GAP = 0.25


def play_for_a_person(host: PtyHost, stdin: Any, stdout: Any, pace: float) -> None:
    """``--dealer person``: the devices play their steps by themselves (one per ``pace``
    seconds); at each console step the person is shown what to type at ``shoewarden run``'s
    dealer console, and the day goes on when they press Enter here."""
    steps = host.steps
    played: Counter[str] = Counter()  # the device steps so far, by event type
    last_device: str | None = None
    while not host.player.done and not host.stopping:
        i = host.player.i
        step = steps[i]
        device = host.player.device_for(step)
        if device is not None and last_device is not None and device != last_device:
            # a step of another device than the last one (the scanner's count, then the
            # shuffler's shuffle): at a real table seconds apart, here microseconds. run
            # reads each device on its own thread and takes them as they arrive, so give
            # the first one time to arrive before the next device speaks
            time.sleep(max(pace, DEVICE_SWITCH_GAP))
        if device is not None:
            last_device = device
        if device is None:
            after = ", ".join(f"{k} {n}" for k, n in sorted(played.items())) or "nothing"
            stdout.write(f"step {i + 1}/{len(steps)} ({step.event['type']}): type at the "
                         f"dealer console:  {console_command(step.event)}\n  once run shows "
                         f"the devices' inputs so far ({after}), then press Enter here "
                         "(Ctrl-D stops)\n")
            stdout.flush()
            if not stdin.readline():
                return
        host.step(1)
        while host.player.i <= i and not host.stopping:
            time.sleep(0.01)
        if host.player.device_for(step) is not None:
            played[step.event["type"]] += 1
            if pace:
                time.sleep(pace)
    if host.player.done:
        stdout.write("the simulated day has been played; Ctrl-C stops the devices\n")
        stdout.flush()


def main(argv: list[str] | None = None, prog: str = "python -m simulators.pty_host") -> int:
    ap = argparse.ArgumentParser(prog=prog,
                                 description="Simulated shoe, scanner and shuffler on ptys.")
    ap.add_argument("--profile", help="profile name or file (default: the scenario's)")
    ap.add_argument("--seed", type=int, help="seed of the day and the devices (default: the "
                    "scenario's, else random)")
    ap.add_argument("--scenario", help="scenario name or TOML file")
    ap.add_argument("--pace", type=float, help="seconds between steps (default 0: as fast as "
                    "the controller reads)")
    ap.add_argument("--no-shuffler", action="store_true",
                    help="shoe and hand games: the dealer shuffles by hand (console event)")
    ap.add_argument("--shoes", type=int, help="shoes in the day (DayPlan.shoes)")
    ap.add_argument("--rounds-per-block", type=int, help="DayPlan.rounds_per_block")
    ap.add_argument("--decks", type=int, help="decks in the pack")
    ap.add_argument("--table", help="the table id the day opens (DayPlan.table, default T1)")
    ap.add_argument("--link-dir", help="directory for the port symlinks and the console FIFO "
                    "(default: a new temporary directory, removed at exit)")
    ap.add_argument("--exit-after", type=float, help="exit this many seconds after the day "
                    "was played (default: serve until SIGTERM)")
    ap.add_argument("--no-wait", action="store_true",
                    help="play without waiting for HELLO on every device and a console reader")
    ap.add_argument("--exit-with-parent", action="store_true",
                    help="exit (cleaning up) when the process that started this one is gone"
                    if prog.startswith("python") else argparse.SUPPRESS)
    ap.add_argument("--dealer", choices=("simulated", "person"), default="simulated",
                    help="simulated (default): the simulated dealer plays the console steps "
                    "into the console FIFO (for shoewarden bench); person: a person types "
                    "them at shoewarden run's console, shown here one at a time")
    ap.add_argument("--print-allowlist", nargs="?", const="-", metavar="FILE",
                    help="print the [[allowlist]] entries of the simulated devices (TOML, for a "
                    "table config) to FILE or stdout, and exit")
    args = ap.parse_args(argv)
    if args.link_dir is not None:
        why = _bad_link_dir(args.link_dir)
        if why is not None:
            ap.error(f"--link-dir {args.link_dir}: {why}")
    from controller.profiles import ProfileError
    from simulators.scenario import ScenarioError

    def log(msg: str) -> None:
        print(f"pty_host: {msg}", file=sys.stderr, flush=True)

    try:
        scenario = load_scenario(args.scenario) if args.scenario else None
        profile_name = args.profile or (scenario.profile if scenario else None)
        if not profile_name:
            ap.error("--profile is required (the scenario names no profile)")
        plan = DayPlan()
        if scenario is not None:
            plan = scenario.day_plan(plan)
        for opt, attr in (("shoes", "shoes"), ("rounds_per_block", "rounds_per_block"),
                          ("decks", "decks"), ("table", "table")):
            if getattr(args, opt) is not None:
                setattr(plan, attr, getattr(args, opt))
        person = args.dealer == "person"
        host = PtyHost(profile_name, args.seed, plan=plan, scenario=scenario, pace=args.pace,
                       shuffler="none" if args.no_shuffler else None,
                       link_dir=args.link_dir, wait_for_hello=not args.no_wait,
                       wait_for_console=not args.no_wait and not person, log=log,
                       manual=person,
                       parent_pid=os.getppid() if args.exit_with_parent else None)
    except (ProfileError, ScenarioError) as e:
        print(f"{ap.prog}: error: {e}", file=sys.stderr)
        return 2
    if args.print_allowlist is not None:
        return _print_allowlist(host, args.print_allowlist, ap.prog)
    try:
        ports = host.open()
    except OSError as e:
        print(f"{ap.prog}: error: --link-dir {host.link_dir}: {e.strerror or e}",
              file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: host.request_stop())
    signal.signal(signal.SIGINT, lambda *_: host.request_stop())
    signal.signal(signal.SIGHUP, lambda *_: host.request_stop())
    print(json.dumps(ports), flush=True)
    log(f"profile {host.profile.name} seed {host.seed} ({len(host.steps)} steps)")
    try:
        if person:
            host._thread = threading.Thread(target=host.serve, name="pty-host",
                                            kwargs={"exit_after": args.exit_after},
                                            daemon=True)
            host._thread.start()
            play_for_a_person(host, sys.stdin, sys.stdout, args.pace or 0.0)
            while host._thread.is_alive():
                host._thread.join(0.2)
        else:
            host.serve(exit_after=args.exit_after)
    finally:
        host.close()
    return 0


def _bad_link_dir(path: str) -> str | None:
    """Why ``path`` cannot hold the ports and the console FIFO (None: it can)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        return "exists and is not a directory"
    parent = p if p.exists() else next((a for a in p.parents if a.exists()), Path("/"))
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{parent} is not writable"
    if str(p.resolve()).startswith(("/proc", "/sys", "/dev/")):
        return "not a place for symlinks and a FIFO (a kernel file system)"
    return None


def _print_allowlist(host: PtyHost, target: str, prog: str) -> int:
    lines = [f"# the simulated devices of {prog} (profile {host.profile.name})"]
    for entry in host.allowlist():
        lines.append("[[allowlist]]")
        lines += [f'{k} = "{v}"' for k, v in entry.items()]
        lines.append("")
    text = "\n".join(lines)
    if target == "-":
        sys.stdout.write(text)
        return 0
    try:
        Path(target).write_text(text, encoding="utf-8")
    except OSError as e:
        print(f"{prog}: error: {target}: {e.strerror or e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
