"""The SWP/1 driver: a device over a link and a transport, its messages turned into outputs.

:class:`SwpDriver` owns a :class:`~drivers.transport.Transport` (bytes) and a
:class:`~drivers.link.Link` (the SWP/1 :class:`~drivers.link.ProtocolLink` by default:
frames, sequence numbers, acks, heartbeats). The reader thread only queues what came in;
:meth:`SwpDriver.poll`, in the owner's thread, feeds it to the link and turns the link's
results into outputs: messages through the device driver's :meth:`SwpDriver.handle`
(shoe, scanner, shuffler subclass it), the identity through the allowlist, link trouble
into ``device_fault`` / ``device_ok``, malformed traffic through the noise throttle into
``PROTOCOL_ERROR`` diagnostics. Without a transport the driver is pure (tests feed it
bytes and read :attr:`SwpDriver.outbox`).
"""

from __future__ import annotations

import logging
import math
import queue
import time
from abc import abstractmethod
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from controller.events import CardDrawn, DeviceConnected
from drivers.allowlist import Allowlist, check_kind, check_same_device
from drivers.base import DeviceDriver, DriverState
from drivers.diagnostics import (
    DEVICE_IDENTITY,
    DISCONNECTED,
    DRIVER_ERROR,
    IO_ERROR,
    NAK,
    PROTOCOL_ERROR,
    UNREADABLE_CARD,
    DeviceDiagnostic,
    DeviceNotice,
    Output,
)
from drivers.errors import DeviceDisconnected, DeviceError, DeviceIdentityError, DeviceTimeout
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
from drivers.payload import PayloadError, body_bool, body_card, unreadable
from drivers.protocol import Identity, Kind
from drivers.transport import Transport, TransportFault

log = logging.getLogger("shoewarden.drivers")

HANDSHAKE_TIMEOUT = 3.0
LINK_FAULTS = (DISCONNECTED, NO_ACK, SILENT, IO_ERROR)  # cleared by a good re-handshake


def _timing(key: str, value: Any) -> float:
    """A timing a table sets: a finite number of seconds, more than 0. NaN passed a plain
    ``< 0`` test, and ``handshake_timeout`` was taken as given: a string stopped the device
    thread at its first handshake (a review); a 0 made every wait end at once (the link
    faulted on its first heartbeat)."""
    if (isinstance(value, bool) or not isinstance(value, int | float) or not value > 0
            or not math.isfinite(value)):
        raise ValueError(f"{key}: expected a positive number, got {value!r}")
    return float(value)


def _count(key: str, value: Any) -> int:
    """A count a table sets (``retries``): a whole number, 0 or more; 2.5 was taken as 2."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key}: expected a whole number, 0 or more, got {value!r}")
    return value


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
        #: NAKs, likewise: a device refusing resend after resend made 1,652 fsynced NAK
        #: diagnostics in 6 s (a review)
        self.naks = NoiseThrottle()
        self.refusal: DeviceIdentityError | None = None
        self._state = DriverState.CLOSED
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
                opts[key] = (_count if key == "retries" else _timing)(key, config[key])
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
        try:
            link = cls.link_class(**cls.link_options(config))
            kwargs.setdefault("handshake_timeout", _timing(
                "handshake_timeout", config.get("handshake_timeout", HANDSHAKE_TIMEOUT)))
        except ValueError as e:  # (the key's check names the key: name its device too)
            raise ValueError(f"devices.{name}.{e}") from None
        return cls(name, cls.make_transport(name, config), allowlist=allowlist, link=link,
                   **kwargs)

    # state ------------------------------------------------------------------------
    @property
    def state(self) -> DriverState:
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
        self._state = DriverState.HANDSHAKE
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
        self._state = DriverState.CLOSED

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
        out += self._nak_reports(self.naks.end())
        if self._state != DriverState.REFUSED:
            self._state = DriverState.LOST
        return out + self.fault(DISCONNECTED, detail)

    # the pure path ----------------------------------------------------------------
    def feed(self, data: bytes, now: float) -> list[Output]:
        """Bytes from the device → outputs. Never raises for any bytes."""
        return self._results(self.link.receive(data, now), now)

    def tick(self, now: float) -> list[Output]:
        out = self._results(self.link.tick(now), now)
        out += self._noise_reports(self.noise.tick(now))
        out += self._nak_reports(self.naks.tick(now))
        if (self._state == DriverState.HANDSHAKE
                and now - self._connected_at >= self.handshake_timeout):
            out.append(self.note("HANDSHAKE_FAILED",
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
        if self._state in (DriverState.HANDSHAKE, DriverState.READY):
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
            if self._state == DriverState.READY and self._identity is not None:
                return self._identity
            if self._state == DriverState.REFUSED and self.refusal is not None:
                raise self.refusal
            if self._state in (DriverState.LOST, DriverState.CLOSED) or self.clock() >= deadline:
                raise DeviceTimeout(f"no identity within {timeout:g} s (state {self._state})",
                                    device=self.name)
            sleep(interval)

    # commands ---------------------------------------------------------------------
    def command(self, kind: int, body: dict[str, Any] | None = None,
                now: float | None = None) -> int:
        """Send a command (ACK + retries by the link); returns its seq. The outcome comes
        back through :meth:`poll` (a ``NAK`` diagnostic, or a ``NO_ACK`` fault)."""
        if self._state != DriverState.READY:
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

    def _nak_reports(self, reports: list[NoiseReport]) -> list[Output]:
        """The NAKs the throttle lets through: the first of a kind at once, then counts."""
        names = {"line_noise": "naks", "line_noise_ended": "naks_ended"}
        return [self.diagnostic(NAK, names.get(r.kind, r.kind.split(":", 1)[0]), detail=(
            f"{r.count} NAK(s): {r.detail}" if r.kind in names else r.detail))
            for r in reports]

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
                if r.frame_type is not None and (r.kind == "bad_payload" or r.differs):
                    # (a frame dropped for its number that is no copy of the one delivered
                    # under it: a card in it was never read — a review: a frame from the
                    # future, once cleared, made the next 100 cards vanish as "late")
                    out += self.unusable(r.frame_type, r.detail)
                return out
            case LinkFault():
                if r.code == LOST_FRAMES and LOST_FRAMES in self.open_faults:
                    # play has stopped on the first loss; further losses while it is open
                    # are counted through the throttle, exactly, in bounded inputs — a
                    # device jumping its seq on every frame must not make each an fsynced
                    # fault (drivers/noise.py)
                    return self._noise_reports(self.noise.offer("lost_frames", 1, r.detail,
                                                                now))
                return self.fault(r.code, r.detail, repeat=r.code == LOST_FRAMES)
            case LinkRecovered():
                return self.ok(r.code, r.detail)
            case CommandDone():
                return self._command_done(r, now)
        return []  # pragma: no cover

    def _command_done(self, r: CommandDone, now: float) -> list[Output]:
        out: list[Output] = []
        if not r.ok and r.reason != "no ack":
            # (counted per command and reason: a burst of one reason is one line, and
            # another reason gets its own first line — a review: 'door open' was lost)
            out += self._nak_reports(self.naks.offer(f"{kind_name(r.kind)}: {r.reason}"[:80],
                                                     1, r.reason, now))
        if r.kind == Kind.HELLO and not r.ok and self._state == DriverState.HANDSHAKE:
            out.append(self.note("HANDSHAKE_FAILED", detail=f"HELLO: {r.reason}"))
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
        if kind == Kind.DOOR:  # (a door whose state is unknown is open: play stops, as a
            # JAM's or FAULT's would — a review: only a warning, play went on)
            return self.fault("DOOR_OPEN", f"the door's message was unusable ({detail}): "
                              "taken as open until it says it is closed"[:300])
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
        self._identity = identity
        self._state = DriverState.READY
        # the input the log keeps; the runtime adds what only it knows (driver name, port)
        out: list[Output] = [DeviceConnected(
            device=self.name, kind=identity.kind or None, model=identity.model or None,
            serial=identity.serial or None, firmware=identity.firmware or None,
            firmware_hash=identity.firmware_hash or None, t=self.utc())]
        for code in (*LINK_FAULTS, DEVICE_IDENTITY):
            out += self.ok(code, "device identified again")
        self.link.clear_fault(NO_ACK)
        return out

    def clear_fault(self, code: str) -> list[Output]:
        """As a person clears it; the link is told too (SILENT is then watched again: a
        review found the link never heard of the clearing)."""
        self.link.clear_fault(code)
        return super().clear_fault(code)

    def _refuse(self, error: DeviceIdentityError, now: float) -> list[Output]:
        log.error("%s: device refused: %s", self.name, error)
        self.refusal = error
        self._state = DriverState.REFUSED
        out: list[Output] = [self.diagnostic(DEVICE_IDENTITY, getattr(error, "field", ""),
                                             detail=str(error))]  # the error: self.refusal
        out += self.fault(DEVICE_IDENTITY, str(error))
        self._stop_transport()
        self._generation += 1
        out += self._results(self.link.reset(now, refused=True), now)
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

    def notice(self, msg: Message) -> DeviceNotice:
        return self.note(msg.name, data=msg.body)
