"""The table runtime: one event queue, one engine thread that owns the session and the log.

::

    device reader threads ─ bytes ─▶ driver inbox ─┬─ device up: polls it itself ──────┐
                                                   └─ wake ─▶ DEVICE THREAD (polls) ─┤
    console channel thread ─ JSON line (bench) ──────────────────────────────────────┤
    dealer console thread ─ input event (run) ───────────────────────────────────────┼─▶ queue
    other threads: stop, show the state ─────────────────────────────────────────────┘    │
                                                                    ENGINE THREAD ◀─────┘

A driver is polled (``supervisor.poll``) under its slot's lock, by one of two threads:

- its **reader thread**, right after it queued the device's bytes, when the device is up
  and the lock is free (:meth:`Supervisor.poll_received
  <drivers.supervisor.Supervisor.poll_received>`): a card's frame is decoded and posted
  by the thread that read it, with no hand-over to another thread on its way. Measured
  (``benchmarks/device_bench.py``, software time of a card): p50 0.18–0.20 → 0.14–0.18
  ms, p99 0.30–0.31 → 0.21–0.31 ms; a thread's wake-up is a GIL hand-over, and this one
  was paid by every card;
- the **device thread** otherwise: when the device is not up (the handshake, the
  reconnect cycle: opening a transport starts a reader thread, which is the owner's work),
  when the lock was taken, and every ``tick`` for the link timers (heartbeats, resends).

Either way links are served at once — acknowledgements, resend requests, heartbeats —
however far the engine is behind, and what the drivers make is posted to the queue, in the
order each driver made it (posted under the lock). The **engine thread** (the owner) is the
only one that touches
the engine and the audit log, and the only one that shows outputs. For each input event
it calls :meth:`TableSession.feed <controller.session.TableSession.feed>`, which writes
the input to the audit log first (write-ahead: fsynced under the default durability) and
its outputs after; only then is ``on_fed`` called to show them. So nothing is shown that
is not already in the log.

What the drivers make goes through a **sequencer** before it is fed: for real devices
(:class:`DirectSequencer`) events are fed as they come; the bench orders them against the
simulated dealer's console with :class:`~controller.app.sequencing.ConsoleMerger`. Events
a device message caused are *counted*; a driver's own link events (``SILENT``,
``NO_ACK``, ``LOST_FRAMES``, ``DISCONNECTED``, ``IO_ERROR``, ``DEVICE_IDENTITY`` and their
``device_ok``) and diagnostics are not (:func:`counted_flags`).

Diagnostics are inputs too, typed from the driver on: a ``device_diagnostic``
(``PROTOCOL_ERROR``, ``DEVICE_IDENTITY``, ``NAK``, ``DRIVER_ERROR``: the engine raises the
``PROTOCOL_ERROR`` and ``DEVICE_IDENTITY`` deviations) is fed as the driver made it; a
``device_connected`` gets the two things only the runtime knows, the driver's registry name
and the port (:func:`dataclasses.replace`). Notices go to the text log only (logger
``shoewarden.runtime``). No event is turned into a dict on its way: the object a driver
made is the one the audit writer serialises.

Neither thread dies silently: any exception (the device thread's is handed to the engine
thread) is logged with its traceback, fed as ``device_fault`` ``controller`` /
``CONTROLLER_ERROR`` (so the log says why the table stopped, and a restart begins in
``device_fault`` until a person clears it), kept in :attr:`TableRuntime.error`, and the
runtime stops.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import partial
from typing import Any, Protocol

from controller.events import (
    DEVICE_INFO_EVENTS,
    DeckCheck,
    DeviceConnected,
    DeviceDiagnostic,
    DeviceFault,
    DeviceOk,
    Event,
    EventError,
    parse_event,
    screen,
)
from controller.outputs import Output
from controller.session import TableSession
from drivers.base import DeviceDriver
from drivers.diagnostics import (
    DEVICE_IDENTITY,
    DISCONNECTED,
    DRIVER_ERROR,
    IO_ERROR,
    NAK,
    PROTOCOL_ERROR,
    UNREADABLE_CARD,
    DeviceNotice,
    level_of,
    utc_now,
)
from drivers.diagnostics import Output as DriverOutput
from drivers.link import LOST_FRAMES, NO_ACK, SILENT
from drivers.supervisor import Backoff, Supervisor, SupervisorState

log = logging.getLogger("shoewarden.runtime")

CONTROLLER = "controller"
CONTROLLER_ERROR = "CONTROLLER_ERROR"
IDENTITY_RETRY = "IDENTITY_RETRY"
"""A ``device_diagnostic`` (a note): a person asked for a refused device to be tried again."""
LINK_CODES = frozenset({SILENT, NO_ACK, LOST_FRAMES, DISCONNECTED, IO_ERROR, DEVICE_IDENTITY})
"""``device_fault`` codes a driver raises about its link (not caused by a device message)."""
LOGGED_DIAGNOSTICS = frozenset({PROTOCOL_ERROR, DEVICE_IDENTITY, NAK, DRIVER_ERROR})
"""Diagnostics written to the audit log as ``device_diagnostic`` inputs."""

FedCallback = Callable[[Event, list[Output], "int | None"], None]


def counted_flags(outputs: Sequence[DriverOutput]) -> list[bool]:
    """For one ``poll``'s outputs: was each an input event a device message caused?

    Not counted: notices and the events about the devices themselves (diagnostics, an
    identified device); link faults and their ``device_ok`` (:data:`LINK_CODES`);
    ``device_ok`` ``SHOE_EMPTY`` (cleared by the next card, which is counted itself); an
    ``UNREADABLE_CARD`` that comes with a deck check (the deck check is the message's
    event). docs/devices.md, "The console channel and its ordering guarantee".
    """
    flags: list[bool] = []
    for i, o in enumerate(outputs):
        if not isinstance(o, Event) or o.type in DEVICE_INFO_EVENTS:
            flags.append(False)
        elif isinstance(o, DeviceFault | DeviceOk):
            nxt = outputs[i + 1] if i + 1 < len(outputs) else None
            flags.append(not (
                o.code in LINK_CODES
                or (isinstance(o, DeviceOk) and o.code == "SHOE_EMPTY")
                or (isinstance(o, DeviceFault) and o.code == UNREADABLE_CARD
                    and isinstance(nxt, DeckCheck))))
        else:
            flags.append(True)
    return flags


class Sequencer(Protocol):
    """Orders what the devices (and a simulated dealer's console) produce before it is fed."""

    @property
    def ended(self) -> bool: ...

    def console_line(self, line: dict[str, Any]) -> None: ...

    def device_event(self, device: str, event: Event, counted: bool = True) -> None: ...

    def abandon(self, device: str) -> None: ...

    def ready(self) -> list[tuple[Event | dict[str, Any], int | None]]:
        """Events to feed now, in order, each with the ``line`` to log it with (or None): a
        driver's typed event, or a console line's JSON object still to be parsed."""
        ...


class DirectSequencer:
    """Real devices: every event is fed as it comes (each device is in order by itself)."""

    ended = False

    def __init__(self) -> None:
        self._out: list[tuple[Event | dict[str, Any], int | None]] = []

    def console_line(self, line: dict[str, Any]) -> None:
        """There is no console channel with real devices: the dealer posts input events."""

    def device_event(self, device: str, event: Event, counted: bool = True) -> None:
        self._out.append((event, None))

    def abandon(self, device: str) -> None:
        """Nothing waits for a device here."""

    def ready(self) -> list[tuple[Event | dict[str, Any], int | None]]:
        out, self._out = self._out, []
        return out


@dataclass
class DeviceSlot:
    """One device: its driver, the supervisor that keeps it connected, its registry name."""

    name: str
    driver: DeviceDriver
    supervisor: Supervisor
    driver_name: str
    connects: int = 0
    #: held while the driver is polled and its outputs posted (reader or device thread)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


@dataclass
class RuntimeStats:
    """What happened on the devices in this run (the summary's device lines)."""

    fed: int = 0
    connects: Counter[str] = field(default_factory=Counter)
    reconnects: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)  # "device:CODE"
    protocol_errors: Counter[str] = field(default_factory=Counter)  # "device kind" -> count
    diagnostics: Counter[str] = field(default_factory=Counter)  # "device CODE"
    bad_events: int = 0
    last_progress: float = 0.0


def port_of(driver: DeviceDriver) -> str | None:
    """Where the device is: the serial path actually opened (a symlink resolved, so a pty
    shows as ``/dev/pts/N``), a pyserial URL, or ``usb:VID:PID[ serial S]``."""
    transport = getattr(driver, "transport", None)
    if transport is None:
        return None
    current = getattr(transport, "current", None) or getattr(transport, "url", None)
    if isinstance(current, str) and current:
        return os.path.realpath(current) if current.startswith("/") else current
    vendor, product = getattr(transport, "vendor", None), getattr(transport, "product", None)
    if isinstance(vendor, int) and isinstance(product, int):
        serial = getattr(transport, "serial", None)
        return f"usb:{vendor:04x}:{product:04x}" + (f" serial {serial}" if serial else "")
    return None


class Queued(StrEnum):
    """What the engine thread's queue carries (each with its payload)."""

    DEVICE = "device"  # (slot, outputs): what a device's driver made, from the device thread
    EVENT = "event"  # (event, line): a dealer console input, fed in arrival order
    CONSOLE = "console"  # a console channel line (bench), for the sequencer
    CLEAR = "clear"  # (device, code): a person cleared a latched fault
    CALL = "call"  # a function to run in the engine thread
    ERROR = "error"  # (which thread, its exception): the device thread's, a reader thread's
    STOP = "stop"  # the reason to stop


class DeviceThreadError(RuntimeError):
    """The device thread, or a reader thread polling its driver, failed (its exception is
    the cause); the engine thread stops on it."""


class TableRuntime:
    """Runs one table: devices, a sequencer and a session.

    Two threads: the **device thread** owns the drivers (each under a :class:`Supervisor`
    that reconnects it): it polls them when woken and every ``tick`` — so acknowledgements,
    resend requests and heartbeats never wait for the log — and posts what they made to
    the queue; a driver's reader thread polls it itself, under the same lock, when the
    device is up (:meth:`_received`). The **engine thread** owns the session: it consumes the
    queue (device outputs, console lines, dealer inputs), sequences, feeds
    :meth:`TableSession.feed` and calls ``on_fed``.

    ``devices`` maps device names to drivers; ``driver_names`` their registry names (for
    ``device_connected``); ``restore_faults`` the fault codes the recovered engine still
    has open per device (given to the drivers so their clearing is forwarded);
    ``on_fed(event, outputs, line)`` is called in the engine thread after each input is
    logged; ``stop_when()`` is checked after every round of work (the bench stops when the
    simulated day has ended).
    """

    def __init__(self, session: TableSession, *,
                 devices: Mapping[str, DeviceDriver] | None = None,
                 driver_names: Mapping[str, str] | None = None,
                 sequencer: Sequencer | None = None,
                 on_fed: FedCallback | None = None,
                 stop_when: Callable[[], bool] | None = None,
                 restore_faults: Mapping[str, Iterable[str]] | None = None,
                 backoff: Backoff | None = None, tick: float = 0.02,
                 clock: Callable[[], float] = time.monotonic,
                 utc: Callable[[], str] = utc_now) -> None:
        self.session = session
        self.sequencer: Sequencer = sequencer if sequencer is not None else DirectSequencer()
        self.on_fed = on_fed
        self.stop_when = stop_when
        self.tick = tick
        self.clock = clock
        self.utc = utc
        self.stats = RuntimeStats(last_progress=clock())
        self.slots: dict[str, DeviceSlot] = {}
        names = driver_names or {}
        for name, driver in (devices or {}).items():
            sup = Supervisor(driver, backoff=backoff, clock=clock)  # type: ignore[arg-type]
            self.slots[name] = DeviceSlot(name, driver, sup, names.get(name, type(driver).__name__))
        self._restore = {k: tuple(v) for k, v in (restore_faults or {}).items()}
        self._queue: queue.SimpleQueue[tuple[Queued, Any]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._devices_thread: threading.Thread | None = None
        self._devices_wake = threading.Event()
        self._devices_stop = threading.Event()
        self._devices_requests: queue.SimpleQueue[
            tuple[str, str, queue.SimpleQueue[list[Any]]]] = queue.SimpleQueue()
        self.error: str | None = None
        self.stop_reason: str | None = None

    # ------------------------------------------------------------------ any thread

    def post_event(self, event: Event | dict[str, Any], line: int | None = None) -> None:
        """An input from the dealer console (fed in arrival order, not sequenced)."""
        self._queue.put((Queued.EVENT, (event, line)))

    def post_console(self, line: dict[str, Any]) -> None:
        """A line of a simulated dealer's console channel (for the sequencer)."""
        self._queue.put((Queued.CONSOLE, line))

    def clear_fault(self, device: str, code: str) -> None:
        """A person dealt with a fault: the driver's ``device_ok`` (or, for a fault no driver
        holds — one from before a restart, the controller's own — a ``device_ok`` directly),
        fed in order with the dealer's other inputs."""
        self._queue.put((Queued.CLEAR, (device, code)))

    def post_call(self, fn: Callable[[], None]) -> None:
        """Run ``fn()`` in the engine thread (to read the engine's state safely, e.g. to show
        it); an exception from it stops the runtime like any other."""
        self._queue.put((Queued.CALL, fn))

    def request_stop(self, reason: str = "stop requested") -> None:
        """Stop after everything posted before this has been handled."""
        self._queue.put((Queued.STOP, reason))

    def deliver(self, device: str, outputs: list[DriverOutput]) -> None:
        """Handle what one poll of ``device``'s driver made, in the calling thread, exactly
        as the engine thread handles the device thread's posting (routing, sequencing,
        logging). For a runtime that is not started: the receive-path fuzz drives the drivers
        itself and needs the runtime's own routing, not a copy of it."""
        if self._thread is not None:
            raise RuntimeError("deliver() is for a runtime that is not started")
        self._handle((Queued.DEVICE, (self.slots[device], outputs)))

    def start(self) -> TableRuntime:
        self._thread = threading.Thread(target=self._main, name="shoewarden-engine",
                                        daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the engine thread to end; True if it has."""
        return self._done.wait(timeout)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def run(self) -> None:
        """Run the engine loop in the calling thread (it becomes the engine thread)."""
        self._main()

    # ------------------------------------------------------------------ device thread

    def _devices_main(self) -> None:
        """Poll the drivers whenever a reader thread queued something (else every ``tick``,
        for the link timers) and post what they made; never die silently."""
        try:
            now = self.clock()
            for slot in self.slots.values():
                slot.driver.wakeup = partial(self._received, slot)  # type: ignore[attr-defined]
                restore = self._restore.get(slot.name, ())
                with slot.lock:
                    if restore:
                        slot.driver.restore_faults(restore)
                    self._post_outputs(slot, slot.supervisor.start(now))
            while not self._devices_stop.is_set():
                self._devices_wake.wait(self.tick)
                self._devices_wake.clear()
                while True:
                    try:
                        device, code, answer = self._devices_requests.get_nowait()
                    except queue.Empty:
                        break
                    answer.put(self._clear(device, code))
                now = self.clock()
                for slot in self.slots.values():
                    with slot.lock:
                        self._post_outputs(slot, slot.supervisor.poll(now))
        except BaseException as exc:
            log.critical("the device thread stopped on an error", exc_info=exc)
            self._queue.put((Queued.ERROR, ("the device thread", exc)))
        finally:
            for slot in self.slots.values():
                try:
                    with slot.lock:
                        slot.supervisor.stop()
                except Exception:
                    log.exception("%s: error while closing", slot.name)

    def _received(self, slot: DeviceSlot) -> None:
        """A driver's reader thread queued bytes: it polls the driver itself when the device
        is up and no other thread is polling it; else the device thread is woken to. A
        failure stops the runtime as the device thread's does (never raises: the reader
        thread goes on reading until it is stopped)."""
        if slot.lock.acquire(blocking=False):
            try:
                out = slot.supervisor.poll_received(self.clock())
                if out is not None:
                    self._post_outputs(slot, out)
                    if slot.supervisor.state == SupervisorState.UP:
                        return
            except BaseException as exc:
                log.critical("%s: polling the driver on its reader thread failed", slot.name,
                             exc_info=exc)
                self._queue.put((Queued.ERROR, (f"{slot.name}'s reader thread", exc)))
                return
            finally:
                slot.lock.release()
        self._devices_wake.set()

    def _post_outputs(self, slot: DeviceSlot, outputs: list[DriverOutput]) -> None:
        if outputs:
            self._queue.put((Queued.DEVICE, (slot, outputs)))

    def _clear(self, device: str, code: str) -> list[Any]:
        """Device thread: the ``device_ok`` for a fault a person dealt with.

        Not for ``DEVICE_IDENTITY``: the controller itself refused the device, and a person
        saying so does not make it allowed. Their ``k`` asks for the device to be tried
        again (a new handshake; logged as an ``IDENTITY_RETRY`` note); the fault clears only
        when the device identifies as an allowed device (the driver's own ``device_ok``)."""
        slot = self.slots.get(device)
        if code == DEVICE_IDENTITY:
            if slot is None:
                why = "no such device in this table's config: it cannot identify again"
            else:
                with slot.lock:
                    self._post_outputs(slot, slot.supervisor.resume(self.clock()))
                why = ("a person asked to try the device again; it stays refused until it "
                       "identifies as a device on the allowlist")
            return [DeviceDiagnostic(device=device, code=IDENTITY_RETRY, kind=code, detail=why,
                                 t=self.utc())]
        outs: list[Any] = []
        if slot is not None:
            with slot.lock:
                if code in slot.driver.open_faults:
                    outs = slot.driver.clear_fault(code)
        return outs or [DeviceOk(device=device, code=code, detail="cleared by a person",
                                 t=self.utc())]

    # ------------------------------------------------------------------ engine thread

    def _main(self) -> None:
        try:
            if self.slots:
                self._devices_thread = threading.Thread(
                    target=self._devices_main, name="shoewarden-devices", daemon=True)
                self._devices_thread.start()
            while True:
                stop = False
                try:
                    item: tuple[Queued, Any] | None = self._queue.get(timeout=self.tick)
                except queue.Empty:
                    item = None
                while item is not None and not stop:
                    stop = self._handle(item)
                    if not stop:
                        try:
                            item = self._queue.get_nowait()
                        except queue.Empty:
                            item = None
                self._release()
                if stop or (self.stop_when is not None and self.stop_when()):
                    break
        except BaseException as exc:  # never die silently
            self._fail(exc)
        finally:
            self._devices_stop.set()
            self._devices_wake.set()
            if self._devices_thread is not None:
                self._devices_thread.join(10)
            self._done.set()

    def _handle(self, item: tuple[Queued, Any]) -> bool:
        kind, payload = item
        if kind == Queued.DEVICE:
            slot, outputs = payload
            self._route(slot, outputs)
            self._release()
        elif kind == Queued.EVENT:
            self._release()
            event, line = payload
            self._feed(event, line)
        elif kind == Queued.CONSOLE:
            self.sequencer.console_line(payload)
            self._release()
        elif kind == Queued.CLEAR:
            self._release()
            device, code = payload
            if self._devices_thread is not None and self._devices_thread.is_alive():
                answer: queue.SimpleQueue[list[Any]] = queue.SimpleQueue()
                self._devices_requests.put((device, code, answer))
                self._devices_wake.set()
                try:
                    outs = answer.get(timeout=10)
                except queue.Empty:
                    raise DeviceThreadError("the device thread did not answer") from None
            else:
                outs = self._clear(device, code)
            for ev in outs:  # a person's act: in order with the dealer's inputs
                self._feed(ev, None)
        elif kind == Queued.CALL:
            self._release()
            payload()
        elif kind == Queued.ERROR:
            where, exc = payload
            raise DeviceThreadError(f"{where} failed: {exc!r}") from exc
        elif kind == Queued.STOP:
            self.stop_reason = str(payload)
            return True
        return False

    def _route(self, slot: DeviceSlot, outputs: list[DriverOutput]) -> None:
        for o, counted in zip(outputs, counted_flags(outputs), strict=True):
            if isinstance(o, DeviceNotice):
                log.info("%s: %s %s", slot.name, o.kind, o.detail or (dict(o.data or {})))
                continue
            if isinstance(o, DeviceDiagnostic):
                self._diagnostic(slot, o)
                continue
            if isinstance(o, DeviceConnected):
                self._connected(slot, o)
                continue
            if isinstance(o, DeviceFault):
                self.stats.faults[f"{slot.name}:{o.code}"] += 1
            self._device_event(slot, o, counted)

    def _device_event(self, slot: DeviceSlot, event: Event, counted: bool) -> None:
        """Hand a driver's event on as it is, after the typed path's safety check (what
        :func:`~controller.events.parse_event` would refuse is dropped the same way)."""
        try:
            screen(event)
        except EventError as e:
            self.stats.bad_events += 1
            log.error("not an input event, dropped: %s: %r", e, event)
            return
        self.sequencer.device_event(slot.name, event, counted)

    def _connected(self, slot: DeviceSlot, ev: DeviceConnected) -> None:
        log.info("%s: IDENTIFIED %s %s %s", slot.name, ev.kind, ev.model, ev.serial)
        slot.connects += 1
        self.stats.connects[slot.name] += 1
        if slot.connects > 1:
            self.stats.reconnects[slot.name] += 1
        self._device_event(slot, replace(ev, device=slot.name, driver=slot.driver_name,
                                         port=port_of(slot.driver)), False)

    def _diagnostic(self, slot: DeviceSlot, d: DeviceDiagnostic) -> None:
        log.log(level_of(d), "%s: %s %s %s", slot.name, d.code, d.kind or "", d.detail or "")
        if d.code not in LOGGED_DIAGNOSTICS:
            return
        self.stats.diagnostics[f"{slot.name} {d.code}"] += 1
        if d.code == PROTOCOL_ERROR:
            self.stats.protocol_errors[f"{slot.name} {d.kind or ''}"] += 1
        if d.device != slot.name:
            d = replace(d, device=slot.name)
        self._device_event(slot, d, False)
        if d.code == DEVICE_IDENTITY:
            self.sequencer.abandon(slot.name)  # what it would have sent will never come

    def _release(self) -> None:
        for event, line in self.sequencer.ready():
            self._feed(event, line)

    def _feed(self, event: Event | dict[str, Any], line: int | None) -> None:
        if not isinstance(event, Event):
            try:
                event = parse_event(event)
            except EventError as e:
                self.stats.bad_events += 1
                log.error("not an input event, dropped: %s: %r", e, event)
                return
        outputs = self.session.feed(event, line=line)
        self.stats.fed += 1
        self.stats.last_progress = self.clock()
        if self.on_fed is not None:
            self.on_fed(event, outputs, line)

    def _fail(self, exc: BaseException) -> None:
        self.error = f"{type(exc).__name__}: {exc}"
        log.critical("the engine thread stopped on an error: %s", self.error, exc_info=exc)
        try:
            event = DeviceFault(device=CONTROLLER, code=CONTROLLER_ERROR,
                                detail=f"the controller stopped: {self.error}"[:300], t=self.utc())
            outputs = self.session.feed(event)
        except Exception:
            log.exception("the controller error could not be logged")
            return
        if self.on_fed is not None:
            try:
                self.on_fed(event, outputs, None)
            except Exception:
                log.exception("the controller error could not be shown")
