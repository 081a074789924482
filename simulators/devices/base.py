"""The device side of SWP/1 (docs/protocol.md), shared by every simulated device.

A :class:`Device` is a pure state machine with injected time and a byte interface:

- ``receive(data, now)`` takes the controller's bytes (any chunking);
- ``tick(now) -> bytes`` returns what the device sends at time ``now``.

``now`` is a float in seconds on any clock that only moves forward (the pty host passes
seconds since it started; time-triggered faults are measured on it). Nothing reads a
clock, a port or a random source that was not injected.

Link behaviour (the same for every device):

- Nothing is sent before the controller's ``HELLO``. ``HELLO`` (at any time) restarts the
  device's numbering at 0, empties its resend buffer and is answered ``ACK`` then
  ``IDENTITY``; a retry of it (same seq) while that answer is still queued (a slow device)
  changes nothing. Events the device produced meanwhile are kept and follow the handshake.
- Every frame carries the next sequence number (assigned when it is sent); the last
  :data:`RESEND_DEPTH` frames sent are kept exactly as they should have been, and ``RESEND
  {"from": s}`` is answered ``ACK`` and then those frames again, same numbers, or ``NAK``
  when ``s`` is no longer held.
- Commands are answered ``ACK {"ack": seq}`` and then their results, or ``NAK {"nak": seq,
  "reason": ...}`` for a command this device does not have. A retried command (a seq seen
  since the handshake) is acknowledged again and not run again.
- ``HEARTBEAT {}`` goes out whenever nothing was sent for ``heartbeat`` seconds.
- Responses (ACK, NAK, IDENTITY, STATUS, resent frames) overtake queued events; a jam's
  pause holds events only.

Device *events* (what the dealer does) are queued by the high-level actions of the
subclasses (``draw()``, ``scan()``, ``deliver()`` ...), which take no time argument: they go
out at the next ``tick``. :attr:`Device.events_emitted` counts the queued messages that
become input events (:data:`EVENT_MESSAGES`); the pty host's console channel orders the
dealer's console events against these counts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import secrets
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from drivers.framing import MAX_PAYLOAD, SEQ_MODULO, Frame, FrameDecoder, FramingError, encode
from drivers.protocol import HEARTBEAT_PERIOD, Identity, Kind
from simulators.faults import CONTENT, PAUSE, WIRE, Fault, garble, noise, oversized

#: frames kept for a RESEND: more than the protocol's 256, so that a deck check's scan,
#: sent in one burst (8 decks: 418 frames; the controller holds up to 512 behind a hole),
#: can be sent again whole when its first frame was garbled and the controller asked only
#: once the burst had passed (a flaky bench: a garbled SCAN_BEGIN, 313 frames behind it,
#: the resend refused, LOST_FRAMES)
RESEND_DEPTH = 2048

# Messages that become an input event (docs/protocol.md "From messages to input events"):
# one each; a scan (SCAN_BEGIN … SCAN_END) counts once, at SCAN_END.
EVENT_MESSAGES = frozenset({
    Kind.CARD_OUT, Kind.CUT_CARD_OUT, Kind.SHOE_EMPTY, Kind.DOOR, Kind.JAM, Kind.JAM_CLEARED,
    Kind.SCAN_END, Kind.SHUFFLE_DONE, Kind.DECK_CHECK, Kind.DELIVERED, Kind.DISCARDS_ACCEPTED,
    Kind.FAULT, Kind.FAULT_CLEARED,
})

_DEFAULTS = {
    "shoe": ("SW-SHOE-1", "SH000001", "2.4.1"),
    "scanner": ("SW-SCAN-1", "SC000001", "1.3.0"),
    "batch_shuffler": ("SW-SHUF-B1", "SB000001", "3.1.0"),
    "continuous_shuffler": ("SW-SHUF-C1", "CS000001", "3.2.0"),
}


def firmware_hash(model: str, firmware: str) -> str:
    """The simulated devices' firmware hash: ``sha256:`` of ``"<model> <firmware>"``."""
    return "sha256:" + hashlib.sha256(f"{model} {firmware}".encode()).hexdigest()


def default_identity(model_key: str, kind: str | None = None) -> Identity:
    """The identity a simulated device reports unless configured otherwise."""
    model, serial, firmware = _DEFAULTS[model_key]
    kind = kind or ("shuffler" if model_key.endswith("shuffler") else model_key)
    return Identity(kind, model, serial, firmware, firmware_hash(model, firmware))


DEFAULT_IDENTITIES: dict[str, Identity] = {k: default_identity(k) for k in _DEFAULTS}


def identity_body(identity: Identity) -> dict[str, str]:
    return {"kind": identity.kind, "model": identity.model, "serial": identity.serial,
            "firmware": identity.firmware, "firmware_hash": identity.firmware_hash}


@dataclass
class _Item:
    """An entry of an output queue: a frame to send, a pause, or a fault marker."""

    what: str  # "frame" | "raw" | "pause" | "mark"
    type: int = 0
    body: dict[str, Any] | None = None
    wire: list[Fault] = field(default_factory=list)
    raw: bytes = b""  # "raw": an already-numbered frame (a resend)
    seconds: float = 0.0
    fault: Fault | None = None
    ready_at: float | None = None  # a slow device's release time


class Device:
    """One simulated device speaking SWP/1. Subclasses add their actions and commands."""

    kind = "device"
    model_key = "shoe"
    commands: frozenset[int] = frozenset()

    def __init__(self, identity: Identity | None = None, *, heartbeat: float = HEARTBEAT_PERIOD,
                 faults: Iterable[Fault] = (), rng: Any = None, name: str | None = None) -> None:
        self.identity = identity or default_identity(self.model_key)
        self.name = name or self.kind
        self.heartbeat = heartbeat
        # the device's own randomness (its shuffles, noise bytes, flipped bits):
        # a seeded random.Random for a reproducible run, else the system's
        self.rng = rng if rng is not None else secrets.SystemRandom()
        self.faults: list[Fault] = list(faults)
        self._decoder = FrameDecoder()
        self._control: deque[_Item] = deque()
        self._events: deque[_Item] = deque()
        self._sent: OrderedDict[int, bytes] = OrderedDict()
        self.resend_depth = RESEND_DEPTH  #: frames kept for a RESEND (a test may lower it)
        self._cmd_seen: dict[int, tuple[int, dict[str, Any]]] = {}
        self._hello_seq: int | None = None
        self.tx_seq = 0
        self.greeted = False
        self.last_tx: float | None = None
        self.now = 0.0
        self._hold_until: float | None = None
        self._silent_until: float | None = None
        self._slow_until: float | None = None
        self._slow_delay = 0.0
        self._armed_wire: list[Fault] = []
        self._armed_content: list[Fault] = []
        #: seconds the link should stay down, set when a disconnect fault fires; the
        #: transport closes the link and calls :meth:`link_reset` when it is back
        self.link_down: float | None = None
        self.events_emitted = 0
        self.frames_sent = 0
        self.rx_errors = 0
        self.counters = {"card": 0, "shuffle": 0, "check": 0}
        #: every card this device reported leaving it (CARD_OUT / DELIVERED), in order:
        #: its face, or "??" when it was reported unreadable (a foreign card included)
        self.cards_out: list[str] = []
        #: fault activations, for the host's console notes (drained by the host)
        self.notes: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ byte interface

    def receive(self, data: bytes, now: float) -> None:
        """Bytes from the controller."""
        self.now = now
        self._activate_due(now)
        for item in self._decoder.feed(data):
            if isinstance(item, FramingError):
                self.rx_errors += 1
                continue
            self._handle(item, now)

    def tick(self, now: float, limit: int | None = None) -> bytes:
        """What the device sends at ``now`` (possibly nothing); at most ``limit`` event
        frames (responses are never held back by the limit)."""
        self.now = now
        self._activate_due(now)
        if self.link_down is not None or not self.greeted:
            return b""
        if self._silent_until is not None:
            if now < self._silent_until:
                return b""
            self._silent_until = None
        if self._slow_until is not None:
            if now < self._slow_until:
                for item in (*self._control, *self._events):
                    if item.what in ("frame", "raw") and item.ready_at is None:
                        item.ready_at = now + self._slow_delay
            else:
                self._slow_until = None
        out = bytearray()
        while self._control and self._ready(self._control[0], now):
            out += self._transmit(self._control.popleft())
        sent = 0
        # events follow the handshake's answer: none leaves before a queued IDENTITY (a slow
        # device answering a HELLO would otherwise number them before it)
        answering = any(item.type == Kind.IDENTITY for item in self._control)
        while (self._events and not answering
               and (self._hold_until is None or now >= self._hold_until)):
            if limit is not None and sent >= limit:
                break
            item = self._events[0]
            if item.what == "pause":
                self._events.popleft()
                self._hold_until = now + item.seconds
                continue
            if item.what == "mark":
                self._events.popleft()
                assert item.fault is not None
                self._activate(item.fault, now)
                if self.link_down is not None or self._silent_until is not None:
                    break
                continue
            if not self._ready(item, now):
                break
            out += self._transmit(self._events.popleft())
            sent += 1
        if (not out and self._silent_until is None and self.link_down is None
                and self.last_tx is not None and now - self.last_tx >= self.heartbeat):
            out += self._transmit(_Item("frame", Kind.HEARTBEAT, {}))
        if out:
            self.last_tx = now
        return bytes(out)

    def link_reset(self) -> None:
        """The link was re-established (a new pty, a re-plug): wait for HELLO again."""
        self.link_down = None
        self.greeted = False
        self._control.clear()
        self._decoder = FrameDecoder()

    def pending(self) -> int:
        """Frames queued and not yet sent."""
        return sum(1 for i in (*self._control, *self._events) if i.what in ("frame", "raw"))

    def idle(self) -> bool:
        """Nothing queued (responses or events)."""
        return not self._control and not self._events

    # ------------------------------------------------------------------ queueing

    def _emit(self, type_: int, body: dict[str, Any] | None = None, *,
              wire: list[Fault] | None = None, counted: bool | None = None) -> None:
        """Queue an event message (it leaves at a later tick)."""
        self._events.append(_Item("frame", type_, body or {}, list(wire or ())))
        if type_ in (Kind.CARD_OUT, Kind.DELIVERED):
            face = (body or {}).get("card")
            self.cards_out.append(face if isinstance(face, str) else "??")
        if counted if counted is not None else type_ in EVENT_MESSAGES:
            self.events_emitted += 1

    def _respond(self, type_: int, body: dict[str, Any] | None = None) -> None:
        item = _Item("frame", type_, body or {})
        if self._slow_until is not None and self.now < self._slow_until:
            item.ready_at = self.now + self._slow_delay  # late from when the command came
        self._control.append(item)

    def _pause(self, seconds: float) -> None:
        self._events.append(_Item("pause", seconds=seconds))

    def _ready(self, item: _Item, now: float) -> bool:
        return item.ready_at is None or now >= item.ready_at

    def _transmit(self, item: _Item) -> bytes:
        if item.what == "raw":
            self.frames_sent += 1
            return item.raw
        seq = self.tx_seq
        self.tx_seq = (self.tx_seq + 1) % SEQ_MODULO
        frame = encode(seq, item.type, item.body)
        self._sent[seq] = frame
        self._sent.move_to_end(seq)
        while len(self._sent) > self.resend_depth:
            self._sent.popitem(last=False)
        faults = item.wire + self._armed_wire
        self._armed_wire = []
        out = frame
        for f in faults:
            self._note(f, seq=seq, type=Kind(item.type).name)
            if f.kind == "garble":
                out = garble(out, self.rng, f["bits"])
            elif f.kind == "drop":
                out = b""
            elif f.kind == "duplicate":
                out = out + out
            elif f.kind == "noise":
                out = noise(self.rng, f["bytes"]) + out
            elif f.kind == "oversized":
                out = oversized(seq, item.type, f["size"]) + out
        self.frames_sent += 1
        return out

    # ------------------------------------------------------------------ faults

    def _note(self, fault: Fault, **extra: Any) -> None:
        self.notes.append({**fault.describe(), "now": round(self.now, 3), **extra})

    def _activate_due(self, now: float) -> None:
        due = [f for f in self.faults if f.time is not None and f.time <= now]
        if not due:
            return
        self.faults = [f for f in self.faults if f not in due]
        for f in due:
            if f.layer == WIRE:
                self._armed_wire.append(f)
            elif f.layer == CONTENT:
                self._armed_content.append(f)
            elif f.kind in ("jam", "door"):
                self._note(f)
                self._fault_episode(f)
            else:
                self._activate(f, now)

    def _activate(self, f: Fault, now: float) -> None:
        """A pause-layer fault takes effect now."""
        self._note(f)
        if f.kind == "silent":
            self._silent_until = now + f["seconds"]
        elif f.kind == "slow":
            self._slow_until = now + f["seconds"]
            self._slow_delay = f["delay"]
        elif f.kind == "disconnect":
            self.link_down = f["seconds"]
            self.greeted = False
        elif f.kind == "wrong_identity":
            keys = ("model", "serial", "firmware", "firmware_hash")
            changes = {k: f[k] for k in keys if f[k]}
            self.identity = dataclasses.replace(
                self.identity, **(changes or {"serial": "FOREIGN-" + self.identity.serial}))

    def _fault_episode(self, f: Fault) -> None:
        """Queue a jam or open door: its message, a pause, its clearing (subclasses)."""

    def _point(self, point: str) -> list[Fault]:
        """Count one ``point`` (a card, a shuffle, a check) and return the faults it fires:
        those triggered at this count and armed time-triggered content faults for it."""
        self.counters[point] += 1
        n = self.counters[point]
        fired = [f for f in self.faults if getattr(f, point, None) == n]
        self.faults = [f for f in self.faults if f not in fired]
        armed = [f for f in self._armed_content if self._content_point(f) == point]
        self._armed_content = [f for f in self._armed_content if f not in armed]
        return fired + armed

    def _content_point(self, f: Fault) -> str:
        """What a time-triggered content fault waits for on this device."""
        return f.spec.point

    def _at_point(self, fired: list[Fault]) -> tuple[list[Fault], list[Fault]]:
        """Queue the pause-layer faults of a point (before its frame); return the wire and
        content faults for the caller to apply to the frame itself."""
        for f in fired:
            if f.layer == PAUSE:
                if f.kind in ("jam", "door"):
                    self._note(f)
                    self._fault_episode(f)
                else:
                    self._events.append(_Item("mark", fault=f))
        wire = [f for f in fired if f.layer == WIRE]
        content = [f for f in fired if f.layer == CONTENT]
        for f in content:
            self._note(f)
        return wire, content

    # ------------------------------------------------------------------ commands

    def _handle(self, frame: Frame, now: float) -> None:
        try:
            body = frame.body()
        except (ValueError, UnicodeDecodeError):
            body = None
        if frame.type == Kind.HELLO:
            if self.link_down is not None:
                return
            if (self.greeted and frame.seq == self._hello_seq
                    and any(i.type == Kind.IDENTITY for i in self._control)):
                return  # a retry of the HELLO being answered (a slow device): it is coming
            self._hello_seq = frame.seq
            self.tx_seq = 0
            self._sent.clear()
            self._control.clear()
            self._cmd_seen = {}
            self.greeted = True
            self.last_tx = now
            self._ack(frame.seq)
            self._respond(Kind.IDENTITY, identity_body(self.identity))
            return
        if not self.greeted or frame.type in (Kind.ACK, Kind.NAK):
            return
        if frame.seq in self._cmd_seen:
            kind, reply = self._cmd_seen[frame.seq]
            self._respond(kind, reply)
            return
        if body is None:
            self._nak(frame.seq, "payload is not a JSON object")
        elif frame.type == Kind.RESEND:
            self._resend(frame.seq, body)
        elif frame.type in self.commands:
            self._ack(frame.seq)
            self._command(Kind(frame.type), body)
        else:
            self._nak(frame.seq, f"unsupported message 0x{frame.type:02x} for a {self.kind}")

    def _ack(self, seq: int) -> None:
        self._cmd_seen[seq] = (Kind.ACK, {"ack": seq})
        self._respond(Kind.ACK, {"ack": seq})

    def _nak(self, seq: int, reason: str) -> None:
        self._cmd_seen[seq] = (Kind.NAK, {"nak": seq, "reason": reason})
        self._respond(Kind.NAK, {"nak": seq, "reason": reason})

    def _resend(self, seq: int, body: dict[str, Any]) -> None:
        start = body.get("from")
        if isinstance(start, bool) or not isinstance(start, int):
            self._nak(seq, "RESEND needs an integer 'from'")
            return
        start %= SEQ_MODULO
        if start != self.tx_seq and start not in self._sent:
            self._nak(seq, f"frame {start} is no longer held")
            return
        self._ack(seq)
        if start == self.tx_seq:
            return
        seqs = list(self._sent)
        for s in seqs[seqs.index(start):]:
            self._control.append(_Item("raw", raw=self._sent[s]))

    def _command(self, kind: Kind, body: dict[str, Any]) -> None:
        """Run an acknowledged command (subclasses)."""

    # ------------------------------------------------------------------ helpers

    def _fits(self, body: dict[str, Any]) -> bool:
        return len(json.dumps(body, separators=(",", ":"))) <= MAX_PAYLOAD

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.identity.serial} seq={self.tx_seq}>"
