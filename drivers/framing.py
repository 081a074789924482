"""The reference protocol's framer: bytes ⇄ frames, pure, no I/O (docs/protocol.md).

Frame layout (all integers big-endian)::

    +------+------+-----+-------+------+--------+-----------+-------+
    | 0xA5 | 0x5A | ver | seq   | type | length | payload   | crc16 |
    |  1   |  1   |  1  |  2    |  1   |   2    | length    |   2   |
    +------+------+-----+-------+------+--------+-----------+-------+

``crc16`` is CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF; the standard
library's ``binascii.crc_hqx(data, 0xFFFF)``) over ``ver`` … ``payload``. The
payload is a JSON object in ASCII (non-ASCII escaped; at most :data:`MAX_PAYLOAD`
bytes).

:class:`FrameDecoder` takes bytes in any chunking and returns complete frames
and framing errors. After noise, a bad CRC, an impossible length or a bad
version it drops one byte and hunts for the next start marker, so a valid
frame inside noise is always found. It never raises for any input bytes.
Sequence numbers are checked by :class:`SequenceChecker`, kept apart so the
decoder stays a pure byte parser.
"""

from __future__ import annotations

import binascii
import json
import struct
from dataclasses import dataclass, field
from typing import Any

from controller import jsontext

START = b"\xa5\x5a"
VERSION = 1
MAX_PAYLOAD = 1024
HEADER = struct.Struct(">2sBHBH")  # start, version, seq, type, length
HEADER_SIZE = HEADER.size  # 8
CRC_SIZE = 2
MAX_FRAME = HEADER_SIZE + MAX_PAYLOAD + CRC_SIZE
SEQ_MODULO = 1 << 16


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE, as the standard library computes it."""
    return binascii.crc_hqx(data, 0xFFFF)


@dataclass(frozen=True, slots=True)
class Frame:
    seq: int
    type: int
    payload: bytes = b""

    def body(self) -> dict[str, Any]:
        """The payload as a JSON object (``{}`` when empty); raises ``ValueError`` if not.

        Decoded at the controller's one text boundary (:mod:`controller.jsontext`): a
        payload that is not valid Unicode (a ``\\ud800`` escape, a byte that is not UTF-8),
        NaN or nests absurdly deep is refused here, as a bad payload, so no string a
        device sends can stop the audit writer further on."""
        if not self.payload:
            return {}
        value = jsontext.loads(self.payload)
        if not isinstance(value, dict):
            raise ValueError("payload is not a JSON object")
        return value


@dataclass(frozen=True, slots=True)
class FramingError:
    """Bytes that did not form a frame: ``kind`` is one of noise, bad_crc, oversized,
    bad_version, truncated; ``size`` the bytes dropped."""

    kind: str
    size: int
    detail: str = ""


def encode(seq: int, type_: int, body: dict[str, Any] | bytes | None = None,
           *, version: int = VERSION) -> bytes:
    """One frame's bytes. ``body`` is a dict (JSON-encoded) or raw payload bytes."""
    if isinstance(body, dict):
        # ASCII only: 0xA5 can then never occur in a payload, so a start marker found
        # past a header is always the start of another frame, never payload bytes.
        payload = json.dumps(body, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    else:
        payload = body or b""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    head = HEADER.pack(START, version, seq % SEQ_MODULO, type_, len(payload))
    return head + payload + struct.pack(">H", crc16(head[2:] + payload))


@dataclass
class FrameDecoder:
    """Incremental decoder: ``feed(bytes) -> list[Frame | FramingError]``.

    Every ``A5 5A`` is a possible start. The candidate at the head of the buffer is
    decided only from bytes that are already here, and only when no later byte can
    change the decision, so the frames found never depend on how the bytes were
    chunked:

    - a bad version or an impossible length: drop it (one byte) and hunt on;
    - a later start marker inside the candidate's span begins a complete frame whose
      CRC matches: the candidate was torn (truncated) — drop it, hunt on, and that
      frame is found next; decided as soon as the inner frame is in, so a frame
      after a torn header is never held back waiting for bytes that will not come;
    - the candidate is complete: its CRC decides (frame, or drop one byte);
    - otherwise wait for more bytes.

    A frame whose last byte is ``0xA5`` may have been noise — a frame torn one byte
    short, whose missing CRC byte the next frame's start byte happened to supply (1 torn
    frame in 256). So that byte is kept as a possible start (:attr:`kept`): followed by
    ``0x5A`` it begins a candidate like any other, and the frame after the torn one is
    found; followed by anything else it is dropped, silently, as the frame's own byte.

    The buffer never holds more than one frame's worth (:data:`MAX_FRAME`) of bytes, and
    the byte kept.
    """

    buffer: bytearray = field(default_factory=bytearray)
    #: the buffer's first byte is the last byte of the frame just found (see above)
    kept: bool = False

    def feed(self, data: bytes) -> list[Frame | FramingError]:
        self.buffer += data
        out: list[Frame | FramingError] = []
        buf = self.buffer
        while True:
            if self.kept:
                if len(buf) < 2:
                    break  # (the next byte decides)
                self.kept = False
                if buf[1] != START[1]:
                    del buf[:1]  # the frame's own last byte, not a start
            start = buf.find(START)
            if start < 0:
                # keep a trailing 0xA5: it may be the first half of a start marker
                keep = 1 if buf.endswith(START[:1]) else 0
                dropped = len(buf) - keep
                if dropped:
                    out.append(FramingError("noise", dropped))
                    del buf[:dropped]
                break
            if start:
                out.append(FramingError("noise", start))
                del buf[:start]
            if len(buf) < HEADER_SIZE:
                break
            _, version, seq, type_, length = HEADER.unpack_from(buf)
            if version != VERSION:
                out.append(FramingError("bad_version", self._skip(), f"version {version}"))
                continue
            if length > MAX_PAYLOAD:
                out.append(FramingError("oversized", self._skip(),
                                        f"length {length} > {MAX_PAYLOAD}"))
                continue
            total = HEADER_SIZE + length + CRC_SIZE
            inner = _complete_frame_within(buf, min(total, len(buf)))
            if inner:
                out.append(FramingError("truncated", self._skip(),
                                        f"frame cut short by the frame at byte {inner}"))
                continue
            if len(buf) < total:
                break
            (crc,) = struct.unpack_from(">H", buf, HEADER_SIZE + length)
            if crc != crc16(bytes(buf[2:HEADER_SIZE + length])):
                out.append(FramingError("bad_crc", self._skip(),
                                        f"seq {seq} type 0x{type_:02x}"))
                continue
            out.append(Frame(seq, type_, bytes(buf[HEADER_SIZE:HEADER_SIZE + length])))
            if buf[total - 1] == START[0]:
                del buf[:total - 1]
                self.kept = True
            else:
                del buf[:total]
        return out

    def _skip(self) -> int:
        """Drop the candidate's start byte and the bytes before the next possible start."""
        nxt = self.buffer.find(START[:1], 1)
        size = nxt if nxt > 0 else len(self.buffer)
        del self.buffer[:size]
        return size

    def pending(self) -> int:
        """Bytes held waiting for the rest of a frame (not the byte kept)."""
        return len(self.buffer) - self.kept


def _complete_frame_within(buf: bytearray, limit: int) -> int:
    """The offset of the first start marker after offset 0 that begins a complete
    frame with a matching CRC ending at or before ``limit``; 0 if there is none."""
    pos = buf.find(START, 1, limit)
    while 0 < pos <= limit - HEADER_SIZE - CRC_SIZE:
        _, version, _, _, length = HEADER.unpack_from(buf, pos)
        end = pos + HEADER_SIZE + length + CRC_SIZE
        if version == VERSION and length <= MAX_PAYLOAD and end <= limit:
            (crc,) = struct.unpack_from(">H", buf, end - CRC_SIZE)
            if crc == crc16(bytes(buf[pos + 2:end - CRC_SIZE])):
                return pos
        pos = buf.find(START, pos + 1, limit)
    return 0


@dataclass(frozen=True, slots=True)
class SequenceIssue:
    """``kind`` gap (``missing`` frames lost), duplicate, or out_of_order."""

    kind: str
    expected: int
    got: int
    missing: int = 0


@dataclass
class SequenceChecker:
    """Checks one direction's sequence numbers (mod 2**16). Never skips silently.

    ``check(seq)`` returns ``(accept, issue)``: a repeat of a recent frame is a
    duplicate (not accepted again); an older frame is out of order (not
    accepted); a jump forward is a gap (accepted, with the count missing).
    """

    expected: int | None = None
    window: int = 256
    recent: list[int] = field(default_factory=list)

    def check(self, seq: int) -> tuple[bool, SequenceIssue | None]:
        if self.expected is None:
            self._accept(seq)
            return True, None
        expected = self.expected
        if seq == expected:
            self._accept(seq)
            return True, None
        ahead = (seq - expected) % SEQ_MODULO
        if seq in self.recent:
            return False, SequenceIssue("duplicate", expected, seq)
        if ahead >= SEQ_MODULO - self.window:
            return False, SequenceIssue("out_of_order", expected, seq)
        self._accept(seq)
        return True, SequenceIssue("gap", expected, seq, missing=ahead)

    def _accept(self, seq: int) -> None:
        self.expected = (seq + 1) % SEQ_MODULO
        self.recent.append(seq)
        if len(self.recent) > self.window:
            del self.recent[0]

    def reset(self) -> None:
        """A new connection: the device's numbering restarts."""
        self.expected = None
        self.recent.clear()
