"""The SWP/1 link state machine (docs/protocol.md), pure: bytes and time in, typed results out.

:class:`ProtocolLink` never reads a clock and never does I/O. The caller feeds it
received bytes with the current monotonic time (``receive(data, now)``), calls
``tick(now)`` for its timers, and gets back a list of results:

* :class:`Send` — a frame to write to the device (``HELLO``, ``RESEND``, ``CMD_*``
  and their retries, same ``seq`` on a retry);
* :class:`Message` — an accepted device message (sequence-checked, payload a dict);
* :class:`Identified` — the device's ``IDENTITY`` (the handshake is done);
* :class:`CommandDone` — a command was ACKed, NAKed or given up (``NO_ACK``);
* :class:`ProtocolIssue` — malformed traffic, with its size and the running total;
* :class:`LinkFault` / :class:`LinkRecovered` — ``SILENT``, ``NO_ACK``, ``LOST_FRAMES``.

Lost frames are never skipped silently. On a sequence gap the frame is accepted
but held, ``RESEND {"from": first_missing}`` is sent, and frames are released in
sequence order once the gap fills; if it does not fill within ``resend_timeout``,
``LOST_FRAMES`` is raised first and the held frames follow it.

A vendor adapter whose device speaks another protocol writes its own link with
the same methods and result types (subclass :class:`LinkBase`); the drivers do
not care which link they drive (docs/devices.md).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from drivers.diagnostics import LOST_FRAMES, NO_ACK, SILENT
from drivers.errors import ProtocolError
from drivers.framing import (
    HEADER_SIZE,
    SEQ_MODULO,
    Frame,
    FrameDecoder,
    FramingError,
    SequenceChecker,
    encode,
)
from drivers.protocol import (
    ACK_TIMEOUT,
    COMMAND_RETRIES,
    COMMANDS,
    HEARTBEAT_TIMEOUT,
    Identity,
    Kind,
)

CONTROLLER = "shoewarden 0.1.0"
RESEND_TIMEOUT = 2.0  # > ACK_TIMEOUT * (COMMAND_RETRIES + 1): the RESEND has its own retries
#: framing errors that may be a frame damaged on the wire, not bytes of noise
#: (a bad version or length is as likely noise with a start marker in it: not these)
_FRAME_DAMAGE = frozenset({"bad_crc", "truncated"})
MAX_RESEND = 256  # a gap wider than the duplicate window cannot be resent: lost at once



class LinkState(StrEnum):
    """Where a link's session is (equal to its plain string, as vendor links may use)."""

    IDLE = "idle"  # no connection, or it was reset
    HANDSHAKE = "handshake"  # HELLO sent (or the connection opened): waiting for IDENTITY
    READY = "ready"  # identified: frames are numbered, acked and watched by the heartbeat


# link fault codes (each becomes a device_fault with this code): drivers/diagnostics.py

_KNOWN_KINDS = {k.value for k in Kind}
_IMMEDIATE = frozenset({Kind.ACK, Kind.NAK, Kind.HEARTBEAT})  # never held back for ordering


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class Send:
    """Bytes to write to the device: one frame (``attempt`` 0 first, 1..3 retries)."""

    data: bytes
    seq: int
    kind: int
    attempt: int = 0


@dataclass(frozen=True, slots=True)
class Message:
    """A device message that passed framing, sequence and JSON checks."""

    kind: int
    seq: int
    body: dict[str, Any]

    @property
    def name(self) -> str:
        return kind_name(self.kind)


@dataclass(frozen=True, slots=True)
class Identified:
    """The device's IDENTITY arrived (handshake complete, or the device restarted)."""

    identity: Identity
    seq: int = 0


@dataclass(frozen=True, slots=True)
class CommandDone:
    """A command's outcome: ``ok`` (ACK), or not (NAK with its reason, or ``no ack``)."""

    seq: int
    kind: int
    ok: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ProtocolIssue:
    """Malformed traffic. ``kind``: a framing error (noise, bad_crc, oversized, bad_version,
    truncated), a sequence issue (duplicate, out_of_order, gap), or bad_payload,
    unknown_type, unexpected_message, before_identity, stray_ack, late_frame. ``count`` is
    this occurrence's size (bytes for framing errors, frames otherwise), ``total`` the
    running total of that kind on this link. ``frame_type`` is set when a frame's type is
    known (so a driver can tell that an unusable frame was a card)."""

    kind: str
    count: int
    total: int
    detail: str = ""
    frame_type: int | None = None
    #: a frame dropped as a duplicate, out of order or late whose content is not that of
    #: the frame delivered under its number (or none was): a different message under a
    #: reused number — for a card, a card no one has read (:meth:`SwpDriver._result`)
    differs: bool = False


@dataclass(frozen=True, slots=True)
class LinkFault:
    code: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class LinkRecovered:
    code: str
    detail: str = ""


LinkResult = Send | Message | Identified | CommandDone | ProtocolIssue | LinkFault | LinkRecovered


def _acked(frame: Frame) -> Any:
    """The ``ack`` of an ACK frame (None when its payload cannot be read)."""
    try:
        return frame.body().get("ack")
    except ValueError:
        return None


def kind_name(kind: int) -> str:
    try:
        return Kind(kind).name
    except ValueError:
        return f"0x{kind:02x}"


class Link(Protocol):
    """What a driver needs from a link (ProtocolLink, or a vendor adapter's own)."""

    state: LinkState
    identity: Identity | None
    counts: Counter[str]

    def connect(self, now: float) -> list[LinkResult]: ...
    def reset(self, now: float, *, refused: bool = False) -> list[LinkResult]: ...
    def receive(self, data: bytes, now: float) -> list[LinkResult]: ...
    def tick(self, now: float) -> list[LinkResult]: ...
    def send_command(self, kind: int, body: dict[str, Any] | None,
                     now: float) -> list[LinkResult]: ...
    def clear_fault(self, code: str) -> None: ...
    def next_deadline(self) -> float | None: ...


# --------------------------------------------------------------------------- base


class LinkBase(ABC):
    """What every link has: state, counts of malformed traffic, the heartbeat watchdog.

    Subclasses implement :meth:`receive` (calling :meth:`heard` for every good frame or
    line) and :meth:`hello`. ``SILENT`` is raised when nothing good was heard for
    ``heartbeat_timeout`` seconds once the handshake is done, and recovered by the next
    good frame.
    """

    def __init__(self, *, heartbeat_timeout: float = HEARTBEAT_TIMEOUT) -> None:
        self.heartbeat_timeout = heartbeat_timeout
        self.state = LinkState.IDLE
        self.identity: Identity | None = None
        self.counts: Counter[str] = Counter()
        self.last_rx: float | None = None
        self.silent = False
        self._rearm = False  # SILENT cleared by a person: watch again from the next tick

    # subclasses -------------------------------------------------------------
    def hello(self, now: float) -> list[LinkResult]:
        """What to send to open a session (``[]`` for a device that identifies by itself)."""
        return []

    @abstractmethod
    def receive(self, data: bytes, now: float) -> list[LinkResult]:
        """Bytes from the device in; messages, faults and frames to send out."""

    def send_command(self, kind: int, body: dict[str, Any] | None,
                     now: float) -> list[LinkResult]:
        raise ProtocolError(f"this device takes no command {kind_name(kind)}")

    # shared -----------------------------------------------------------------
    def connect(self, now: float) -> list[LinkResult]:
        """A new connection: the session restarts; returns the handshake to send."""
        out = self.reset(now)
        self.state = LinkState.HANDSHAKE
        self.identity = None
        self.last_rx = now
        self.silent = False
        return out + self.hello(now)

    def reset(self, now: float, *, refused: bool = False) -> list[LinkResult]:
        """The connection ended: give back anything still held (subclasses); ``refused``:
        the device was refused at its identity."""
        self.state = LinkState.IDLE
        return []

    def issue(self, kind: str, count: int = 1, detail: str = "",
              frame_type: int | None = None, differs: bool = False) -> ProtocolIssue:
        self.counts[kind] += count
        return ProtocolIssue(kind, count, self.counts[kind], detail, frame_type, differs)

    def heard(self, now: float) -> list[LinkResult]:
        """A good frame arrived: feed the watchdog; clears SILENT."""
        self.last_rx = now
        if self.silent:
            self.silent = False
            return [LinkRecovered(SILENT, "frames arrive again")]
        return []

    def identified(self, identity: Identity) -> None:
        self.identity = identity
        self.state = LinkState.READY

    def tick(self, now: float) -> list[LinkResult]:
        if self._rearm:
            self._rearm, self.last_rx = False, now
        if self.state == LinkState.READY and not self.silent and self.last_rx is not None \
                and now - self.last_rx >= self.heartbeat_timeout:
            self.silent = True
            return [LinkFault(SILENT, f"no frame for {now - self.last_rx:.1f} s "
                                      f"(heartbeat timeout {self.heartbeat_timeout:g} s)")]
        return []

    def clear_fault(self, code: str) -> None:
        """A person cleared a latched fault. ``SILENT`` cleared while no frame came is
        watched again: raised anew a heartbeat timeout later if the device is still silent
        (a review: it was never raised again, and the table took a dead shoe for a live
        one)."""
        if code == SILENT and self.silent:
            self.silent = False
            self._rearm = True

    def next_deadline(self) -> float | None:
        if self._rearm:
            return 0.0  # (at once: the next tick starts the watch again)
        if self.state == LinkState.READY and not self.silent and self.last_rx is not None:
            return self.last_rx + self.heartbeat_timeout
        return None


# --------------------------------------------------------------------------- SWP/1


@dataclass
class _Pending:
    seq: int
    kind: int
    data: bytes
    deadline: float
    attempt: int = 0
    #: a HELLO sent to a silent device: unanswered, it is no NO_ACK (SILENT says it
    #: already, and would clear with the next frame while NO_ACK stayed on — a review)
    probe: bool = False


@dataclass
class _Gap:
    """Frames after a hole, held until the resend fills it (or the deadline passes)."""

    first: int  # first missing seq, the RESEND's "from"
    missing: set[int]
    order: list[int]  # every seq from ``first`` on, in sequence order
    held: dict[int, Frame | None] = field(default_factory=dict)
    deadline: float = 0.0


class RecentSeqs:
    """A set of sequence numbers that forgets the oldest beyond ``limit`` (bounded memory
    whatever a device sends)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._order: deque[int] = deque()
        self._set: set[int] = set()

    def __contains__(self, seq: object) -> bool:
        return seq in self._set

    def __len__(self) -> int:
        return len(self._set)

    def update(self, seqs: Iterable[int]) -> None:
        for seq in seqs:
            if seq in self._set:
                continue
            self._set.add(seq)
            self._order.append(seq)
            if len(self._order) > self.limit:
                self._set.discard(self._order.popleft())

    def clear(self) -> None:
        self._order.clear()
        self._set.clear()


class ProtocolLink(LinkBase):
    """The SWP/1 link: handshake, sequence checks, ACK/retry, RESEND, heartbeat watchdog."""

    def __init__(self, *, controller: str = CONTROLLER,
                 heartbeat_timeout: float = HEARTBEAT_TIMEOUT, ack_timeout: float = ACK_TIMEOUT,
                 retries: int = COMMAND_RETRIES, resend_timeout: float = RESEND_TIMEOUT,
                 window: int = 256) -> None:
        super().__init__(heartbeat_timeout=heartbeat_timeout)
        self.controller = controller
        self.ack_timeout = ack_timeout
        self.retries = retries
        self.resend_timeout = resend_timeout
        self.window = window
        self.decoder = FrameDecoder()
        self.checker = SequenceChecker(window=window)
        self.tx_seq = 0
        self.pending: dict[int, _Pending] = {}
        self.completed: deque[int] = deque(maxlen=64)
        self.no_ack = False
        self.gap: _Gap | None = None
        self.resent: set[int] = set()  # frames we have that a RESEND will bring again
        self.resent_until = 0.0
        self.hello_seq: int | None = None  # the seq of this connection's HELLO
        self.probe_at = 0.0  # while SILENT: when to send the next HELLO
        #: a frame-shaped error since the last good frame (its kind), None after a good one
        self.damaged: str | None = None
        self.counts_quiet: Counter[str] = Counter()  # expected oddities, not errors
        #: per sequence number, the (type, payload) of the frame delivered under it, for
        #: the last :attr:`window` frames: a dropped frame is a copy, or a message lost
        self.delivered: OrderedDict[int, tuple[int, bytes]] = OrderedDict()
        # declared lost; a late copy is reported, not accepted (the most recent only)
        self.lost = RecentSeqs(4 * MAX_RESEND)

    # sending ------------------------------------------------------------------
    def hello(self, now: float) -> list[LinkResult]:
        return self.send_command(Kind.HELLO, {"controller": self.controller}, now)

    def send_command(self, kind: int, body: dict[str, Any] | None,
                     now: float) -> list[LinkResult]:
        """Send a command (ACK expected; retried with the same seq, then NO_ACK)."""
        if kind not in COMMANDS:
            raise ProtocolError(f"{kind_name(kind)} is not a command")
        seq = self.tx_seq
        self.tx_seq = (self.tx_seq + 1) % SEQ_MODULO
        data = encode(seq, kind, body or {})
        self.pending[seq] = _Pending(seq, kind, data, now + self.ack_timeout)
        return [Send(data, seq, kind)]

    # connection ---------------------------------------------------------------
    def connect(self, now: float) -> list[LinkResult]:
        self.tx_seq = 0
        self.checker.reset()
        self.delivered.clear()
        self.no_ack = False
        out = super().connect(now)
        self.hello_seq = next((r.seq for r in out if isinstance(r, Send)
                               and r.kind == Kind.HELLO), None)
        return out

    def reset(self, now: float, *, refused: bool = False) -> list[LinkResult]:
        """``refused``: the device was refused at its identity — none of its frames was
        ever taken, so none was lost."""
        out: list[LinkResult] = []
        out += self._flush_gap("connection reset")
        partial = self.decoder.pending()
        if partial:
            out.append(self.issue("truncated", partial, "partial frame at reset"))
        if partial < HEADER_SIZE:  # (a start marker of noise held back is no frame begun)
            partial = 0
        if self.state == LinkState.READY and not refused and (partial or self.damaged):
            # the last thing the device sent was a frame that did not arrive whole, and the
            # numbering restarts with the next connection: no later frame can show the gap
            # (a review: a garbled card, then an unplug, and the card was never read)
            out.append(LinkFault(LOST_FRAMES, (
                f"the connection ended with {partial} byte(s) of a frame unread"
                if partial else f"the connection ended after a damaged frame ({self.damaged})")
                + ": a card in it was never read"))
        self.damaged = None
        self.decoder = FrameDecoder()
        self.pending.clear()
        self.resent.clear()
        self.lost.clear()
        self.state = LinkState.IDLE
        return out

    # receiving ----------------------------------------------------------------
    def receive(self, data: bytes, now: float) -> list[LinkResult]:
        out: list[LinkResult] = []
        for item in self.decoder.feed(data):
            if isinstance(item, FramingError):
                out.append(self.issue(item.kind, item.size, item.detail))
                if item.kind in _FRAME_DAMAGE:
                    self.damaged = item.kind
            else:
                if self.damaged and item.type == Kind.IDENTITY \
                        and self.state == LinkState.READY:  # (numbering restarts: no gap)
                    out.append(LinkFault(LOST_FRAMES, f"the device restarted after a damaged "
                                         f"frame ({self.damaged}): a card in it was never "
                                         "read"))
                self.damaged = None  # (a loss before it shows as a gap from here)
                out += self.heard(now)
                out += self._frame(item, now)
        return out

    def _frame(self, frame: Frame, now: float) -> list[LinkResult]:
        if frame.type == Kind.IDENTITY:
            return self._identity(frame)
        if (self.state == LinkState.READY and frame.type == Kind.ACK and frame.seq == 0
                and self.hello_seq is not None and _acked(frame) == self.hello_seq):
            # a HELLO retried while the device's answer was on its way (a slow device): the
            # device answers the retry as a new HELLO, restarting its numbering; its IDENTITY
            # follows and restarts ours. Not malformed: dropped quietly.
            self.counts_quiet["hello_retry_answered"] += 1
            return []
        if self.state != LinkState.READY:
            # before the handshake: numbering is not yet the session's
            if frame.type in _IMMEDIATE:
                return self._dispatch(frame)
            return [self.issue("before_identity", 1, f"{kind_name(frame.type)} seq {frame.seq}",
                               frame.type)]
        seq = frame.seq
        gap = self.gap
        if gap is not None and seq in gap.missing:  # the resend fills the hole
            gap.missing.discard(seq)
            self._remember(seq)
            out = self._hold(gap, frame)
            if not gap.missing:
                out += self._release()
            return out
        accept, found = self.checker.check(seq)
        if not accept:
            assert found is not None
            if seq in self.resent:  # sent again after a RESEND: expected, already delivered
                self.resent.discard(seq)
                self.counts["resent"] += 1
                return []
            if seq in self.lost:
                return [self.issue("late_frame", 1, f"seq {seq} arrived after it was declared "
                                                    "lost; dropped", frame.type, True)]
            return [self.issue(found.kind, 1, f"expected {found.expected}, got {seq} "
                                              f"({kind_name(frame.type)})", frame.type,
                               self.delivered.get(seq) != (frame.type, frame.payload))]
        if found is not None:  # a gap: the frame is accepted, held, and a resend asked for
            out = [self.issue(
                "gap", found.missing, f"expected {found.expected}, got {seq}: "
                f"{found.missing} frame(s) missing", frame.type)]
            return out + self._open_gap(found.expected, found.missing, frame, now)
        if gap is not None:
            self.resent.add(seq)
            return self._hold(gap, frame)
        return self._dispatch(frame)

    def _hold(self, gap: _Gap, frame: Frame) -> list[LinkResult]:
        """Keep a frame for in-order release; ACK/NAK/HEARTBEAT act at once (timers).
        At most twice :data:`MAX_RESEND` frames are held: a device that keeps sending past a
        hole it does not fill gets ``LOST_FRAMES`` at once, not an ever-growing buffer."""
        if len(gap.held) >= 2 * MAX_RESEND:
            return self._flush_gap(f"more than {2 * MAX_RESEND} frames held behind the hole") \
                + self._dispatch(frame)
        if frame.seq not in gap.order:
            gap.order.append(frame.seq)
        if frame.type in _IMMEDIATE:
            gap.held[frame.seq] = None
            return self._dispatch(frame)
        gap.held[frame.seq] = frame
        return []

    def _remember(self, seq: int) -> None:
        recent = self.checker.recent
        recent.append(seq)
        if len(recent) > self.window:
            del recent[0]

    def _open_gap(self, first: int, missing: int, frame: Frame, now: float) -> list[LinkResult]:
        gap = self.gap
        out: list[LinkResult] = []
        if missing > MAX_RESEND or (gap is not None and len(gap.missing) + missing > MAX_RESEND):
            out += self._flush_gap("")
            # the last MAX_RESEND of them only, never a list of the whole jump: a device
            # jumping 65,000 ahead on every frame must not cost a list that long a frame
            self.lost.update((first + i) % SEQ_MODULO
                             for i in range(max(0, missing - MAX_RESEND), missing))
            out.append(LinkFault(LOST_FRAMES, f"{missing} frame(s) lost from seq {first} "
                                              "(too many to resend)"))
            return out + self._dispatch(frame)
        if gap is None:
            self.gap = gap = _Gap(first, set(), [], deadline=now + self.resend_timeout)
            self.resent.clear()
            self.resent_until = now + 2 * self.resend_timeout
            out += self.send_command(Kind.RESEND, {"from": first}, now)
        seqs = [(first + i) % SEQ_MODULO for i in range(missing)]  # at most MAX_RESEND
        gap.missing.update(seqs)
        gap.order.extend(seqs)
        self.resent.add(frame.seq)
        return out + self._hold(gap, frame)

    def _release(self) -> list[LinkResult]:
        """Every hole is filled: deliver the held frames in sequence order."""
        gap, self.gap = self.gap, None
        out: list[LinkResult] = []
        if gap is not None:
            for s in gap.order:
                held = gap.held.get(s)
                if held is not None:
                    out += self._dispatch(held)
        return out

    def _flush_gap(self, why: str) -> list[LinkResult]:
        """The hole will not be filled: LOST_FRAMES first, then the held frames in order."""
        gap = self.gap
        if gap is None:
            return []
        missing = [s for s in gap.order if s in gap.missing]
        self.lost.update(missing)
        shown = ", ".join(str(s) for s in missing[:8]) + (", …" if len(missing) > 8 else "")
        out: list[LinkResult] = [LinkFault(
            LOST_FRAMES, f"{len(missing)} frame(s) never arrived (seq {shown})"
            + (f"; {why}" if why else ""))]
        return out + self._release()

    def _identity(self, frame: Frame) -> list[LinkResult]:
        try:
            identity = Identity.from_body(frame.body())
        except ValueError as e:  # includes bad JSON and bad UTF-8
            return [self.issue("bad_payload", 1, f"IDENTITY: {e}", frame.type)]
        out: list[LinkResult] = []
        if self.state == LinkState.READY:
            out += self._flush_gap("the device restarted its numbering")
        # IDENTITY answers the HELLO even if its ACK was lost: no more HELLO retries
        self._drop_hellos()
        # the handshake restarts the device's numbering
        self.checker.reset()
        self.delivered.clear()
        self.checker.check(frame.seq)
        self.identified(identity)
        out.append(Identified(identity, frame.seq))
        return out

    def _dispatch(self, frame: Frame) -> list[LinkResult]:
        kind = frame.type
        delivered = self.delivered  # (the last window's frames, as delivered)
        delivered[frame.seq] = (kind, frame.payload)
        if len(delivered) > self.window:  # (an OrderedDict: a plain dict's first key,
            delivered.popitem(last=False)  # after many deletions, is found in a scan)
        if kind not in _KNOWN_KINDS:
            return [self.issue("unknown_type", 1, f"type 0x{kind:02x} seq {frame.seq}", kind)]
        if kind in COMMANDS:
            return [self.issue("unexpected_message", 1,
                               f"{kind_name(kind)} is a controller → device message", kind)]
        try:
            body = frame.body()
        except ValueError as e:
            return [self.issue("bad_payload", 1, f"{kind_name(kind)} seq {frame.seq}: {e}", kind)]
        if kind == Kind.HEARTBEAT:
            return []
        if kind in (Kind.ACK, Kind.NAK):
            return self._answer(kind, body)
        return [Message(kind, frame.seq, body)]

    def _answer(self, kind: int, body: dict[str, Any]) -> list[LinkResult]:
        key = "ack" if kind == Kind.ACK else "nak"
        seq = body.get(key)
        if isinstance(seq, bool) or not isinstance(seq, int):
            return [self.issue("bad_payload", 1, f"{kind_name(kind)} without an integer "
                                                 f"{key!r}: {body!r}"[:200], kind)]
        pending = self.pending.pop(seq, None)
        if pending is None:
            if seq in self.completed:
                self.counts["late_ack"] += 1  # the answer to an earlier try of a retried frame
                return []
            return [self.issue("stray_ack", 1, f"{kind_name(kind)} for seq {seq}, never sent",
                               kind)]
        self.completed.append(seq)
        out: list[LinkResult] = []
        if kind == Kind.ACK:
            if self.no_ack:
                self.no_ack = False
                out.append(LinkRecovered(NO_ACK, "the device answers again"))
            out.append(CommandDone(seq, pending.kind, True))
            return out
        reason = body.get("reason")
        reason = reason if isinstance(reason, str) else ""
        out.append(CommandDone(seq, pending.kind, False, reason or "refused"))
        if pending.kind == Kind.RESEND:
            out += self._flush_gap(f"the device cannot resend ({reason or 'NAK'})")
        return out

    # timers -------------------------------------------------------------------
    def tick(self, now: float) -> list[LinkResult]:
        out: list[LinkResult] = []
        for seq, p in list(self.pending.items()):
            if now < p.deadline:
                continue
            if p.attempt < self.retries:
                p.attempt += 1
                p.deadline = now + self.ack_timeout
                out.append(Send(p.data, seq, p.kind, p.attempt))
                continue
            del self.pending[seq]
            self.completed.append(seq)
            if p.probe:
                continue
            detail = f"{kind_name(p.kind)} seq {seq} not acknowledged after {self.retries} retries"
            if not self.no_ack:
                self.no_ack = True
                out.append(LinkFault(NO_ACK, detail))
            out.append(CommandDone(seq, p.kind, False, "no ack"))
        if self.gap is not None and now >= self.gap.deadline:
            out += self._flush_gap(f"no resend within {self.resend_timeout:g} s")
        if self.resent and self.gap is None and now >= self.resent_until:
            self.resent.clear()
        was_silent = self.silent
        out += super().tick(now)
        if self.silent and not was_silent:  # (the first HELLO one timeout into the silence)
            self.probe_at = now + self.heartbeat_timeout
        elif self.silent and self.state == LinkState.READY and now >= self.probe_at:
            # a device restarted behind its adapter (the port stayed open) says nothing
            # until a HELLO (docs/protocol.md): ask again every heartbeat timeout while it is
            # silent; its IDENTITY restarts the session (a review: SILENT for good)
            self.probe_at = now + self.heartbeat_timeout
            if not any(p.kind == Kind.HELLO for p in self.pending.values()):
                sent = self.hello(now)
                self.hello_seq = next((r.seq for r in sent if isinstance(r, Send)), None)
                if self.hello_seq is not None:
                    self.pending[self.hello_seq].probe = True
                out += sent
        return out

    def heard(self, now: float) -> list[LinkResult]:
        out = super().heard(now)
        if out and self.state == LinkState.READY:  # SILENT over: no HELLO is asked for now
            self._drop_hellos()
        return out

    def _drop_hellos(self) -> None:
        """No HELLO waits for its ACK any more (answered, or no longer needed)."""
        for seq, p in list(self.pending.items()):
            if p.kind == Kind.HELLO:
                del self.pending[seq]
                self.completed.append(seq)

    def clear_fault(self, code: str) -> None:
        super().clear_fault(code)
        if code == NO_ACK:
            self.no_ack = False

    def next_deadline(self) -> float | None:
        times = [p.deadline for p in self.pending.values()]
        if self.gap is not None:
            times.append(self.gap.deadline)
        base = super().next_deadline()
        if base is not None:
            times.append(base)
        if self.silent and self.state == LinkState.READY:
            times.append(self.probe_at)
        return min(times) if times else None
