"""The driver model: a device driver turns a device's traffic into the engine's input events.

* :class:`DeviceDriver` — the abstract driver (like python-can's ``BusABC``): ``name``,
  ``kind``, ``identity``, ``open()``, ``close()``, ``poll(now) -> list[Output]`` (and an
  optional ``on_event`` callback). An output is an input event
  (:mod:`controller.events`) for the engine, or a :class:`DeviceDiagnostic` for the
  runtime to log: malformed traffic (``PROTOCOL_ERROR``, with counts), a refused
  identity (``DEVICE_IDENTITY``), a NAK, a notice.
* :class:`SwpDriver` — a driver over a :class:`~drivers.link.Link` (the SWP/1
  :class:`~drivers.link.ProtocolLink` by default) and a :class:`Transport`. Device
  drivers (shoe, scanner, shuffler) subclass it and implement :meth:`SwpDriver.handle`.
* :class:`Transport` — bytes in and out (serial, USB, memory), with a reader thread
  (:class:`ReaderThread`) that never dies silently: every exception becomes a
  :class:`TransportFault`, which the driver turns into a ``device_fault``.

Threads: a transport's reader thread only queues bytes and faults; ``poll`` runs in the
caller's (the table's owner) thread, which is where events are produced, frames are
written and the link's timers run. ``poll`` never raises for anything a device sends.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import re
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from controller.cards import Card, CardError, parse_card
from controller.events import CardDrawn, DeckCheck, DeviceFault, DeviceOk, Event
from drivers.allowlist import Allowlist, IdentityMismatch, check_kind, check_same_device
from drivers.errors import (
    DeviceDisconnected,
    DeviceError,
    DeviceIdentityError,
    DeviceNotFound,
    DeviceTimeout,
)
from drivers.link import (
    LOST_FRAMES,
    NO_ACK,
    SILENT,
    CommandDone,
    Identified,
    Link,
    LinkFault,
    LinkRecovered,
    LinkResult,
    Message,
    ProtocolIssue,
    ProtocolLink,
    Send,
    kind_name,
)
from drivers.noise import NoiseReport, NoiseThrottle
from drivers.protocol import Identity, Kind

log = logging.getLogger("shoewarden.drivers")

# device_fault codes raised by the drivers themselves (the device's own come from its messages)
DISCONNECTED = "DISCONNECTED"
IO_ERROR = "IO_ERROR"
DRIVER_ERROR = "DRIVER_ERROR"
UNREADABLE_CARD = "UNREADABLE_CARD"
DEVICE_IDENTITY = "DEVICE_IDENTITY"
LINK_FAULTS = (DISCONNECTED, NO_ACK, SILENT, IO_ERROR)  # cleared by a good re-handshake

# DeviceDiagnostic codes
PROTOCOL_ERROR = "PROTOCOL_ERROR"
NAK = "NAK"
NOTICE = "NOTICE"

HANDSHAKE_TIMEOUT = 3.0

# Bounds on what a device can make the controller hold (issue 8): a device's own fault
# codes are names, not essays, and a device cannot open faults without limit.
DEVICE_FAULT_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,31}")
MAX_OPEN_FAULTS = 16
MAX_DETAIL = 300
MAX_CHECK_CARDS = 1_040
"""Cards one deck check may gather (20 decks): a scan or split DECK_CHECK beyond it is
dropped, never held without end."""


# --------------------------------------------------------------------------- outputs


@dataclass(frozen=True, slots=True)
class DeviceDiagnostic:
    """Something the runtime logs that is not an input event.

    ``code``: ``PROTOCOL_ERROR`` (malformed traffic; ``kind`` says which, ``count`` this
    occurrence, ``total`` the running count of that kind on this device),
    ``DEVICE_IDENTITY`` (a refused device; ``error`` is the :class:`DeviceIdentityError`),
    ``NAK`` (a command refused; ``kind`` the command), ``DRIVER_ERROR`` (a bug caught) or
    ``NOTICE`` (``kind`` IDENTIFIED, LOADED, SHUFFLE_STARTED, STATUS, BUTTON, CONNECT_FAILED,
    HANDSHAKE_FAILED, …; ``data`` the payload).
    """

    device: str
    code: str
    kind: str = ""
    count: int = 0
    total: int = 0
    detail: str = ""
    data: Mapping[str, Any] | None = None
    t: str | None = None
    error: DeviceError | None = field(default=None, compare=False)

    @property
    def level(self) -> int:
        if self.code == NOTICE:
            return logging.INFO
        return logging.ERROR if self.code in (DEVICE_IDENTITY, DRIVER_ERROR) else logging.WARNING

    def to_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "device_diagnostic", "device": self.device,
                               "code": self.code}
        for key in ("kind", "count", "total", "detail", "t"):
            value = getattr(self, key)
            if value:
                out[key] = value
        if self.data is not None:
            out["data"] = dict(self.data)
        return out


Output = Event | DeviceDiagnostic


def utc_now() -> str:
    """The wall-clock time stamp put on events (``t``), ISO-8601 UTC with milliseconds."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --------------------------------------------------------------------------- transports


@dataclass(frozen=True, slots=True)
class TransportFault:
    """A reader thread's report: ``DISCONNECTED`` (the reader stopped), ``IO_ERROR`` (it goes
    on), or ``DRIVER_ERROR`` (the data handler raised; it goes on)."""

    code: str
    detail: str
    error: BaseException | None = field(default=None, compare=False)


class ReaderThread(threading.Thread):
    """Calls ``read()`` in a loop and hands bytes to ``on_data``; NEVER dies silently.

    Every exception is caught and logged: from ``read`` it becomes a fault
    (``DeviceDisconnected`` → ``DISCONNECTED`` and the thread ends; anything else →
    ``IO_ERROR``, and after ``max_errors`` in a row → ``DISCONNECTED``); from ``on_data``
    it becomes ``DRIVER_ERROR`` and reading goes on. The thread's end is always
    reported, unless :meth:`stop` asked for it.
    """

    def __init__(self, read: Callable[[], bytes], on_data: Callable[[bytes], None],
                 on_fault: Callable[[TransportFault], None], *, name: str = "reader",
                 max_errors: int = 5, error_pause: float = 0.05) -> None:
        super().__init__(name=f"shoewarden-{name}", daemon=True)
        self._read = read
        self._on_data = on_data
        self._on_fault = on_fault
        self._stop_event = threading.Event()
        self.max_errors = max_errors
        self.error_pause = error_pause
        self.faults = 0

    def stop(self) -> None:
        self._stop_event.set()

    @property
    def stopping(self) -> bool:
        return self._stop_event.is_set()

    def _report(self, fault: TransportFault) -> None:
        self.faults += 1
        try:
            self._on_fault(fault)
        except Exception:
            log.exception("%s: fault handler failed for %s", self.name, fault.code)

    def run(self) -> None:
        errors = 0
        ended: TransportFault | None = None
        try:
            while not self._stop_event.is_set():
                try:
                    data = self._read()
                except Exception as e:
                    if self._stop_event.is_set():
                        break
                    if isinstance(e, DeviceDisconnected):
                        log.warning("%s: disconnected: %s", self.name, e)
                        ended = TransportFault(DISCONNECTED, str(e), e)
                        break
                    errors += 1
                    log.warning("%s: read error %d/%d: %s", self.name, errors, self.max_errors, e,
                                exc_info=True)
                    if errors >= self.max_errors:
                        ended = TransportFault(DISCONNECTED, f"{errors} read errors in a row: {e}",
                                               e)
                        break
                    self._report(TransportFault(IO_ERROR, str(e), e))
                    self._stop_event.wait(self.error_pause)
                    continue
                errors = 0
                if not data:
                    continue
                try:
                    self._on_data(data)
                except Exception as e:
                    log.exception("%s: data handler raised", self.name)
                    self._report(TransportFault(DRIVER_ERROR, f"data handler raised {e!r}", e))
        except BaseException as e:  # not even this ends the thread unreported
            log.exception("%s: reader loop failed", self.name)
            ended = TransportFault(IO_ERROR, f"reader loop failed: {e!r}", e)
            raise
        finally:
            if ended is not None and not self._stop_event.is_set():
                self._report(ended)
            log.debug("%s: reader stopped", self.name)


class Transport(ABC):
    """Bytes to and from one device. ``read()`` blocks at most a short timeout and returns
    ``b""`` when nothing came; errors are raised as :mod:`drivers.errors` types, ``from``
    the underlying pyserial / pyusb error. A transport can be opened again after
    :meth:`close` (a reconnect)."""

    description = "transport"

    def __init__(self) -> None:
        self._reader: ReaderThread | None = None

    @property
    @abstractmethod
    def is_open(self) -> bool: ...

    @abstractmethod
    def open(self) -> None: ...

    @abstractmethod
    def _close(self) -> None:
        """Release the port / device (the reader thread is already stopped)."""

    @abstractmethod
    def write(self, data: bytes) -> None: ...

    @abstractmethod
    def read(self) -> bytes: ...

    def cancel_read(self) -> None:  # noqa: B027 - optional hook, nothing to do by default
        """Wake a blocked ``read`` (optional)."""

    def start(self, on_data: Callable[[bytes], None],
              on_fault: Callable[[TransportFault], None]) -> ReaderThread:
        """Start the reader thread."""
        self.stop_reader()
        self._reader = ReaderThread(self.read, on_data, on_fault, name=self.description)
        self._reader.start()
        return self._reader

    @property
    def reader(self) -> ReaderThread | None:
        return self._reader

    def stop_reader(self, timeout: float = 1.0) -> None:
        reader, self._reader = self._reader, None
        if reader is None:
            return
        reader.stop()
        try:
            self.cancel_read()
        except Exception:
            log.debug("%s: cancel_read failed", self.description, exc_info=True)
        if reader is not threading.current_thread() and reader.is_alive():
            reader.join(timeout)
            if reader.is_alive():
                log.warning("%s: reader thread did not stop within %.1f s", self.description,
                            timeout)

    def close(self) -> None:
        """Stop the reader thread, then release the port. Safe to call twice."""
        self.stop_reader()
        try:
            self._close()
        except Exception:
            log.warning("%s: error while closing", self.description, exc_info=True)


class MemoryTransport(Transport):
    """An in-memory transport for tests and benches: ``inject()`` what the device sends,
    read ``written`` for what the controller sent, ``disconnect()`` to pull the plug."""

    description = "memory"

    def __init__(self, *, on_write: Callable[[bytes], None] | None = None,
                 available: bool = True) -> None:
        super().__init__()
        self.available = available
        self.on_write = on_write
        self.written: list[bytes] = []
        self.opened = 0
        self._incoming: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._open = False

    @property
    def is_open(self) -> bool:
        return self._open

    def open(self) -> None:
        if not self.available:
            raise DeviceNotFound("memory device not present")
        self._incoming = queue.SimpleQueue()
        self._open = True
        self.opened += 1

    def _close(self) -> None:
        self._open = False

    def inject(self, data: bytes) -> None:
        self._incoming.put(data)

    def disconnect(self) -> None:
        self._incoming.put(None)

    def write(self, data: bytes) -> None:
        if not self._open:
            raise DeviceDisconnected("memory transport is closed")
        self.written.append(bytes(data))
        if self.on_write is not None:
            self.on_write(bytes(data))

    def read(self) -> bytes:
        if not self._open:
            raise DeviceDisconnected("memory transport is closed")
        try:
            data = self._incoming.get(timeout=0.05)
        except queue.Empty:
            return b""
        if data is None:
            self._open = False
            raise DeviceDisconnected("memory device unplugged")
        return data

    def cancel_read(self) -> None:
        self._incoming.put(b"")


# --------------------------------------------------------------------------- payload helpers


class PayloadError(ValueError):
    """A message whose payload lacks a field or has one of the wrong type."""


def body_card(body: Mapping[str, Any], key: str = "card") -> Card:
    token = body.get(key)
    if not isinstance(token, str):
        raise PayloadError(f"{key!r} should be a card string, got {token!r}")
    try:
        return parse_card(token)
    except CardError as e:
        raise PayloadError(str(e)) from e


def body_int(body: Mapping[str, Any], key: str, *, optional: bool = False) -> int | None:
    value = body.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PayloadError(f"{key!r} should be a count, got {value!r}")
    return value


def body_str(body: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    value = body.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise PayloadError(f"{key!r} should be a non-empty string, got {value!r}")
    return value


def body_bool(body: Mapping[str, Any], key: str) -> bool:
    value = body.get(key)
    if not isinstance(value, bool):
        raise PayloadError(f"{key!r} should be true or false, got {value!r}")
    return value


def unreadable(body: Mapping[str, Any]) -> bool:
    return body.get("unreadable") is True


def deck_check(tokens: Iterable[str], t: str | None) -> DeckCheck:
    """A ``deck_check`` from card tokens; tokens that are not one of the 52 are foreign."""
    cards: list[Card] = []
    foreign: list[str] = []
    for token in tokens:
        try:
            cards.append(parse_card(token))
        except CardError:
            foreign.append(str(token))
    return DeckCheck(cards=tuple(sorted(cards)), foreign=tuple(sorted(foreign)), t=t)


# --------------------------------------------------------------------------- drivers


class DeviceDriver(ABC):
    """A card-handling device as the runtime sees it. Subclasses set :attr:`kind`.

    ``poll(now)`` returns input events (for ``TableSession.feed``) and diagnostics (for
    the log) in the order they happened; with ``on_event`` set, each output is also
    passed to it. Faults the driver raised are remembered in :attr:`open_faults` so a
    ``device_ok`` is only sent for a fault that is open.
    """

    kind: ClassVar[str] = ""

    def __init__(self, name: str, *, on_event: Callable[[Output], None] | None = None,
                 utc: Callable[[], str] = utc_now,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.on_event = on_event
        self.utc = utc
        self.clock = clock
        self.open_faults: dict[str, str | None] = {}
        self._identity: Identity | None = None

    @property
    def identity(self) -> Identity | None:
        """The identity admitted at the last handshake (``None`` before one)."""
        return self._identity

    @property
    @abstractmethod
    def state(self) -> str:
        """``closed``, ``handshake``, ``ready``, ``lost`` or ``refused``."""

    @abstractmethod
    def open(self, now: float | None = None) -> None:
        """Open the transport and start the handshake (does not wait for it)."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def poll(self, now: float | None = None) -> list[Output]: ...

    @classmethod
    def from_config(cls, name: str, config: Mapping[str, Any], *,
                    allowlist: Allowlist | None = None, **kwargs: Any) -> DeviceDriver:
        """Build the driver from a table config's ``[devices.<name>]`` table."""
        raise NotImplementedError(f"{cls.__name__} cannot be built from config")

    @classmethod
    def config_keys(cls) -> frozenset[str]:
        """The keys of ``[devices.<name>]`` this driver reads (``driver`` names it)."""
        return frozenset({"driver"})

    @classmethod
    def check_keys(cls, name: str, config: Mapping[str, Any]) -> None:
        """Refuse a key the driver does not read — a misspelt timeout must not go unnoticed
        (``devices.<name>.<key>: unknown key``, like an unknown top-level key)."""
        known = cls.config_keys()
        for key in config:
            if key not in known:
                raise ValueError(f"devices.{name}.{key}: unknown key for driver "
                                 f"{config.get('driver', cls.__name__)!s} (known: "
                                 f"{', '.join(sorted(known))})")

    def __enter__(self) -> DeviceDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # faults -------------------------------------------------------------------
    def fault(self, code: str, detail: str | None = None, *, t: str | None = None,
              repeat: bool = False) -> list[Output]:
        """A ``device_fault`` (once while open, unless ``repeat``: every unreadable card and
        every loss is news)."""
        if code in self.open_faults and not repeat:
            return []
        detail = detail[:MAX_DETAIL] if detail else detail
        self.open_faults[code] = detail
        return [DeviceFault(device=self.name, code=code, detail=detail or None,
                            t=t or self.utc())]

    def device_fault(self, code: str, detail: str | None = None, *,
                     t: str | None = None) -> list[Output]:
        """A fault code the device itself sent: a name of at most 32 capitals, digits and
        underscores, and at most :data:`MAX_OPEN_FAULTS` open at once. Anything else is
        still a fault — play stops — under the generic code ``FAULT``, the device's
        code in the detail; so no device can make the controller hold without limit."""
        raw = code.strip()
        code = raw.upper()
        if not DEVICE_FAULT_CODE.fullmatch(code):
            shown = raw[:40] + ("…" if len(raw) > 40 else "")
            return self.fault("FAULT", f"device fault code {shown!r}"
                              + (f": {detail}" if detail else ""), t=t)
        if code not in self.open_faults and len(self.open_faults) >= MAX_OPEN_FAULTS:
            return self.fault("FAULT", f"{code} (more than {MAX_OPEN_FAULTS} faults open)"
                              + (f": {detail}" if detail else ""), t=t)
        return self.fault(code, detail, t=t)

    def ok(self, code: str, detail: str | None = None, *, t: str | None = None) -> list[Output]:
        """A ``device_ok`` for an open fault (nothing if it is not open)."""
        if code not in self.open_faults:
            return []
        del self.open_faults[code]
        return [DeviceOk(device=self.name, code=code, detail=detail or None, t=t or self.utc())]

    def clear_fault(self, code: str) -> list[Output]:
        """A person dealt with a latched fault (``UNREADABLE_CARD``, ``LOST_FRAMES``, a door or
        jam the device never reported clear): the ``device_ok`` to feed, if it was open."""
        return self.ok(code, "cleared by a person")

    def restore_faults(self, codes: Iterable[str]) -> None:
        """After a restart: the faults the engine still has open for this device, so their
        clearing messages are forwarded."""
        for code in codes:
            self.open_faults.setdefault(code, None)

    def diagnostic(self, code: str, kind: str = "", *, count: int = 0, total: int = 0,
                   detail: str = "", data: Mapping[str, Any] | None = None,
                   error: DeviceError | None = None, t: str | None = None) -> DeviceDiagnostic:
        return DeviceDiagnostic(self.name, code, kind, count, total, detail, data,
                                t or self.utc(), error)


class SwpDriver(DeviceDriver):
    """A device over a link (SWP/1 by default) and a transport.

    Subclasses list the messages they take in :attr:`accepts` and implement
    :meth:`handle`; :attr:`card_kinds` are the messages that mean "a card left the
    device", so a malformed one is an ``UNREADABLE_CARD`` (a person must read it), never
    a silent drop. Without a transport (``transport=None``) the driver is pure: feed it
    with :meth:`feed` and read what it would send from :attr:`outbox`.
    """

    accepts: ClassVar[frozenset[int]] = frozenset()
    card_kinds: ClassVar[frozenset[int]] = frozenset()
    link_class: ClassVar[Callable[..., Link]] = ProtocolLink

    def __init__(self, name: str, transport: Transport | None = None, *,
                 allowlist: Allowlist | None = None, link: Link | None = None,
                 handshake_timeout: float = HANDSHAKE_TIMEOUT, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.transport = transport
        self.allowlist = allowlist
        self.link: Link = link if link is not None else self.link_class()
        self.handshake_timeout = handshake_timeout
        self.outbox: list[bytes] = []
        self.counts: Counter[str] = Counter()  # driver-level protocol errors (payloads, order)
        self.noise = NoiseThrottle()  # protocol errors reach the log in bounded number
        self.refusal: DeviceIdentityError | None = None
        self._state = "closed"
        self._connected_at = 0.0
        self._generation = 0
        self._inbox: queue.SimpleQueue[tuple[int, bytes | TransportFault]] = queue.SimpleQueue()
        self._pending_out: list[Output] = []
        #: called by the reader thread after it queued bytes or a fault (the runtime uses it
        #: to wake its owner thread, which then calls :meth:`poll`); must not block
        self.wakeup: Callable[[], None] | None = None

    # config ---------------------------------------------------------------------
    @classmethod
    def link_options(cls, config: Mapping[str, Any]) -> dict[str, Any]:
        """Timing overrides a table may set (protocol.py: tables may override them)."""
        opts: dict[str, Any] = {}
        for key in ("heartbeat_timeout", "ack_timeout", "retries", "resend_timeout"):
            if key in config:
                value = config[key]
                if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                    raise ValueError(f"{key}: expected a positive number, got {value!r}")
                opts[key] = int(value) if key == "retries" else float(value)
        return opts

    @classmethod
    def make_transport(cls, name: str, config: Mapping[str, Any]) -> Transport:
        from drivers.serial_transport import SerialTransport
        return SerialTransport.from_config(name, config)

    #: the ``[devices.<name>]`` keys of the transport (a subclass with another transport
    #: names its own)
    transport_keys: ClassVar[tuple[str, ...]] = ("port", "url", "usb_serial", "baudrate")
    #: the keys every SWP driver reads: the link timings and the handshake timeout
    link_keys: ClassVar[tuple[str, ...]] = ("heartbeat_timeout", "ack_timeout", "retries",
                                            "resend_timeout", "handshake_timeout")

    @classmethod
    def config_keys(cls) -> frozenset[str]:
        return super().config_keys() | set(cls.link_keys) | set(cls.transport_keys)

    @classmethod
    def from_config(cls, name: str, config: Mapping[str, Any], *,
                    allowlist: Allowlist | None = None, **kwargs: Any) -> SwpDriver:
        cls.check_keys(name, config)
        link = cls.link_class(**cls.link_options(config))
        kwargs.setdefault("handshake_timeout", config.get("handshake_timeout",
                                                          HANDSHAKE_TIMEOUT))
        return cls(name, cls.make_transport(name, config), allowlist=allowlist, link=link,
                   **kwargs)

    # state ------------------------------------------------------------------------
    @property
    def state(self) -> str:
        return self._state

    def protocol_counts(self) -> Counter[str]:
        """Every malformed-traffic count on this device, link and driver levels."""
        return self.link.counts + self.counts

    # opening and closing ----------------------------------------------------------
    def open(self, now: float | None = None) -> None:
        """Open (or reopen) the transport and send the handshake. Raises
        :class:`DeviceNotFound` / :class:`DeviceError` if the port cannot be opened."""
        now = self.clock() if now is None else now
        self._stop_transport()
        self._generation += 1
        if self.transport is not None:
            self.transport.open()
            gen = self._generation
            self.transport.start(lambda data: self._queue_in(gen, data),
                                 lambda fault: self._queue_in(gen, fault))
        self.refusal = None
        self._state = "handshake"
        self._connected_at = now
        self._pending_out += self.on_reset("reconnected")
        self._pending_out += self._results(self.link.connect(now), now)

    connect = open

    def _queue_in(self, gen: int, item: bytes | TransportFault) -> None:
        """Reader thread: queue what came in, then wake the owner (never raises)."""
        self._inbox.put((gen, item))
        wake = self.wakeup
        if wake is not None:
            try:
                wake()
            except Exception:
                log.exception("%s: wakeup callback failed", self.name)

    def close(self) -> None:
        self._stop_transport()
        self._generation += 1
        self._state = "closed"

    def _stop_transport(self) -> None:
        if self.transport is not None and (self.transport.is_open or self.transport.reader):
            self.transport.close()

    def lost(self, detail: str, now: float | None = None) -> list[Output]:
        """The connection is gone (or could not be made): ``DISCONNECTED`` once, and anything
        the link still held (``LOST_FRAMES`` first)."""
        now = self.clock() if now is None else now
        self._stop_transport()
        self._generation += 1
        out = self._results(self.link.reset(now), now)
        out += self.on_reset(detail)
        out += self._noise_reports(self.noise.end())
        if self._state != "refused":
            self._state = "lost"
        return out + self.fault(DISCONNECTED, detail)

    # the pure path ----------------------------------------------------------------
    def feed(self, data: bytes, now: float) -> list[Output]:
        """Bytes from the device → outputs. Never raises for any bytes."""
        return self._results(self.link.receive(data, now), now)

    def tick(self, now: float) -> list[Output]:
        out = self._results(self.link.tick(now), now)
        out += self._noise_reports(self.noise.tick(now))
        if self._state == "handshake" and now - self._connected_at >= self.handshake_timeout:
            out.append(self.diagnostic(NOTICE, "HANDSHAKE_FAILED",
                                       detail=f"no IDENTITY within {self.handshake_timeout:g} s"))
            out += self.lost(f"no IDENTITY within {self.handshake_timeout:g} s", now)
        return out

    def poll(self, now: float | None = None) -> list[Output]:
        """Take what the reader thread queued, run the timers, send what is due."""
        out = self._poll(self.clock() if now is None else now)
        if self.on_event is not None:
            for o in out:
                self.on_event(o)
        return out

    def _poll(self, now: float) -> list[Output]:
        out, self._pending_out = self._pending_out, []
        while True:
            try:
                gen, item = self._inbox.get_nowait()
            except queue.Empty:
                break
            if gen != self._generation:
                continue  # from a connection that is already closed
            if isinstance(item, TransportFault):
                out += self._transport_fault(item, now)
            else:
                out += self.feed(item, now)
        if self._state in ("handshake", "ready"):
            out += self.tick(now)
        return out

    def wait_identified(self, timeout: float | None = None, *, interval: float = 0.005,
                        sleep: Callable[[float], None] = time.sleep) -> Identity:
        """Poll until the handshake is done. Raises :class:`DeviceIdentityError` if the device
        was refused, :class:`DeviceTimeout` if it did not identify in time. Outputs produced
        meanwhile are kept for the next :meth:`poll`."""
        timeout = self.handshake_timeout if timeout is None else timeout
        deadline = self.clock() + timeout
        while True:
            self._pending_out = self._poll(self.clock())
            if self._state == "ready" and self._identity is not None:
                return self._identity
            if self._state == "refused" and self.refusal is not None:
                raise self.refusal
            if self._state in ("lost", "closed") or self.clock() >= deadline:
                raise DeviceTimeout(f"no identity within {timeout:g} s (state {self._state})",
                                    device=self.name)
            sleep(interval)

    # commands ---------------------------------------------------------------------
    def command(self, kind: int, body: dict[str, Any] | None = None,
                now: float | None = None) -> int:
        """Send a command (ACK + retries by the link); returns its seq. The outcome comes
        back through :meth:`poll` (a ``NAK`` diagnostic, or a ``NO_ACK`` fault)."""
        if self._state != "ready":
            raise DeviceDisconnected(f"cannot send {kind_name(kind)}: device is {self._state}",
                                     device=self.name)
        now = self.clock() if now is None else now
        results = self.link.send_command(kind, body, now)
        self._pending_out += self._results(results, now)
        sends = [r for r in results if isinstance(r, Send)]
        return sends[0].seq if sends else -1

    # link results → outputs -------------------------------------------------------
    def _write(self, data: bytes, now: float) -> list[Output]:
        if self.transport is None:
            self.outbox.append(data)
            return []
        if not self.transport.is_open:
            return []
        try:
            self.transport.write(data)
        except DeviceDisconnected as e:
            return self.lost(str(e), now)
        except DeviceError as e:
            log.warning("%s: write failed: %s", self.name, e)
            return self.fault(IO_ERROR, str(e))
        return []

    def _transport_fault(self, fault: TransportFault, now: float) -> list[Output]:
        if fault.code == DISCONNECTED:
            return self.lost(fault.detail, now)
        if fault.code == DRIVER_ERROR:
            return [self.diagnostic(DRIVER_ERROR, detail=fault.detail)]
        return self.fault(fault.code, fault.detail)

    def _results(self, results: list[LinkResult], now: float) -> list[Output]:
        out: list[Output] = []
        gen = self._generation
        for r in results:
            if self._generation != gen and isinstance(r, Message | Identified | ProtocolIssue):
                continue  # the connection they came on was closed meanwhile (refused, lost)
            try:
                out += self._result(r, now)
            except Exception as e:  # a driver bug must not stop the feed: report it
                log.exception("%s: error handling %r", self.name, r)
                out.append(self.diagnostic(DRIVER_ERROR, type(r).__name__,
                                           detail=f"{e!r} handling {r!r}"[:500]))
        return out

    def _noise_reports(self, reports: list[NoiseReport]) -> list[Output]:
        return [self.diagnostic(PROTOCOL_ERROR, r.kind, count=r.count, total=r.total,
                                detail=r.detail) for r in reports]

    def _result(self, r: LinkResult, now: float) -> list[Output]:
        match r:
            case Send():
                return self._write(r.data, now)
            case Message():
                return self._message(r)
            case Identified():
                return self._identified(r.identity, now)
            case ProtocolIssue():
                # malformed traffic on the link (line noise): through the throttle, so a
                # burst costs a bounded number of inputs (drivers/noise.py)
                out: list[Output] = self._noise_reports(
                    self.noise.offer(r.kind, r.count, r.detail, now))
                if r.kind == "bad_payload" and r.frame_type is not None:
                    out += self.unusable(r.frame_type, r.detail)
                return out
            case LinkFault():
                return self.fault(r.code, r.detail, repeat=r.code == LOST_FRAMES)
            case LinkRecovered():
                return self.ok(r.code, r.detail)
            case CommandDone():
                return self._command_done(r, now)
        return []  # pragma: no cover

    def _command_done(self, r: CommandDone, now: float) -> list[Output]:
        out: list[Output] = []
        if not r.ok and r.reason != "no ack":
            out.append(self.diagnostic(NAK, kind_name(r.kind), detail=r.reason,
                                       data={"seq": r.seq}))
        if r.kind == Kind.HELLO and not r.ok and self._state == "handshake":
            out.append(self.diagnostic(NOTICE, "HANDSHAKE_FAILED",
                                       detail=f"HELLO: {r.reason}"))
            out += self.lost(f"handshake failed: HELLO {r.reason}", now)
        return out

    def _message(self, msg: Message) -> list[Output]:
        t = self.utc()
        if msg.kind not in self.accepts:
            return [self.protocol_error("unexpected_message",
                                        f"{msg.name} from a {self.kind or 'device'}")]
        try:
            return self.handle(msg, t)
        except PayloadError as e:
            detail = f"{msg.name} seq {msg.seq}: {e}"
            return [self.protocol_error("bad_payload", detail), *self.unusable(msg.kind, detail)]

    def protocol_error(self, kind: str, detail: str = "", count: int = 1) -> DeviceDiagnostic:
        self.counts[kind] += count
        return self.diagnostic(PROTOCOL_ERROR, kind, count=count, total=self.counts[kind],
                               detail=detail)

    def unusable(self, kind: int, detail: str) -> list[Output]:
        """A message of this kind arrived but could not be used. A card that left the device
        must be read by a person."""
        if kind in self.card_kinds:
            return self.fault(UNREADABLE_CARD, f"a card left the {self.kind or 'device'} "
                              f"but its message was unusable ({detail})"[:300], repeat=True)
        return []

    def _identified(self, identity: Identity, now: float) -> list[Output]:
        try:
            check_kind(self.kind, identity, device=self.name)
            if self.allowlist is not None:
                self.allowlist.check(identity, device=self.name)
            if self._identity is not None:
                check_same_device(self._identity, identity, device=self.name)
        except DeviceIdentityError as e:
            return self._refuse(e, now)
        first = self._identity is None
        self._identity = identity
        self._state = "ready"
        out: list[Output] = [self.diagnostic(NOTICE, "IDENTIFIED", data={
            "kind": identity.kind, "model": identity.model, "serial": identity.serial,
            "firmware": identity.firmware, "firmware_hash": identity.firmware_hash,
            "first": first})]
        for code in (*LINK_FAULTS, DEVICE_IDENTITY):
            out += self.ok(code, "device identified again")
        self.link.clear_fault(NO_ACK)
        return out

    def _refuse(self, error: DeviceIdentityError, now: float) -> list[Output]:
        log.error("%s: device refused: %s", self.name, error)
        self.refusal = error
        self._state = "refused"
        out: list[Output] = [self.diagnostic(DEVICE_IDENTITY, getattr(error, "field", ""),
                                             detail=str(error), error=error)]
        out += self.fault(DEVICE_IDENTITY, str(error))
        self._stop_transport()
        self._generation += 1
        out += self._results(self.link.reset(now), now)
        return out

    def release_identity(self) -> None:
        """Forget the pinned identity: the next handshake may be another allowed device
        (e.g. a replacement between shoes, after a person's check)."""
        self._identity = None

    # for subclasses -----------------------------------------------------------------
    @abstractmethod
    def handle(self, msg: Message, t: str) -> list[Output]:
        """One accepted device message → outputs. Raise :class:`PayloadError` for a bad one."""

    def on_reset(self, why: str) -> list[Output]:
        """The connection ended: drop (and report) anything half-built."""
        return []

    # shared message handlers ----------------------------------------------------------
    def door(self, body: Mapping[str, Any], t: str) -> list[Output]:
        if body_bool(body, "open"):
            return self.fault("DOOR_OPEN", "the door is open", t=t)
        return self.ok("DOOR_OPEN", "the door is closed", t=t)

    def card(self, body: Mapping[str, Any], t: str) -> list[Output]:
        if unreadable(body):
            return self.fault(UNREADABLE_CARD, f"a card left the {self.kind} unread: "
                              "a person must read it", t=t, repeat=True)
        return [CardDrawn(card=body_card(body), t=t)]

    def notice(self, msg: Message) -> DeviceDiagnostic:
        return self.diagnostic(NOTICE, msg.name, data=msg.body)


__all__ = [
    "DEVICE_IDENTITY", "DISCONNECTED", "DRIVER_ERROR", "IO_ERROR", "NAK", "NOTICE",
    "PROTOCOL_ERROR", "UNREADABLE_CARD", "DeviceDiagnostic", "DeviceDriver", "IdentityMismatch",
    "MemoryTransport", "Output", "PayloadError", "ReaderThread", "SwpDriver", "Transport",
    "TransportFault", "utc_now",
]
