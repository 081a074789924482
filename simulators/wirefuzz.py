"""Hostile device byte streams: what a broken, noisy or malicious device could send.

The fuzz of the controller's whole receive path (``benchmarks/receive_fuzz.py``, and a
smaller run in the tests) feeds these streams to a real driver and routes what it makes
exactly as the runtime routes it, into a real session and audit log. A stream is built
from a seed, so any failure is reproduced by its seed alone.

A stream starts with a correct handshake (an ACK and an IDENTITY — sometimes one the
allowlist refuses), then mixes, in random order and proportions: well-formed messages of
every kind the device may send, with plausible bodies or with hostile ones (lone surrogate
escapes, invalid UTF-8, NaN, 1,000-digit integers, nesting 500 deep, strings 1,000 long,
wrong types, missing fields); messages of kinds the device must not send; line noise full
of start markers; torn, bit-flipped, oversized and duplicated frames; sequence gaps and
rewinds. The bytes arrive in random chunks at random times (bursts, long silences, a clock
that stands still).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from drivers.framing import HEADER, MAX_PAYLOAD, SEQ_MODULO, START, VERSION, crc16, encode
from drivers.protocol import Kind
from simulators.faults import garble

#: what each simulated device kind sends in normal operation (besides the link layer)
SENDS: dict[str, tuple[Kind, ...]] = {
    "shoe": (Kind.CARD_OUT, Kind.CUT_CARD_OUT, Kind.SHOE_EMPTY, Kind.DOOR, Kind.JAM,
             Kind.JAM_CLEARED, Kind.BUTTON),
    "scanner": (Kind.SCAN_BEGIN, Kind.SCAN_CARD, Kind.SCAN_END),
    "shuffler": (Kind.LOADED, Kind.SHUFFLE_STARTED, Kind.SHUFFLE_DONE, Kind.DECK_CHECK,
                 Kind.DELIVERED, Kind.DISCARDS_ACCEPTED, Kind.FAULT, Kind.FAULT_CLEARED,
                 Kind.STATUS),
}

#: the identity every fuzzed device presents (the harness allowlists it)
MODEL, SERIAL, FIRMWARE, FIRMWARE_HASH = "FZ-1", "FZ0001", "1.0", "sha256:" + "ab" * 32

RANKS, SUITS = "A23456789TJQK", "SHDC"

#: strings no text boundary may let through unchanged, or that stress one
HOSTILE_STRINGS: tuple[bytes, ...] = (
    b'"\\ud800"', b'"\\udfff\\ud800"', b'"a\\ud83c"', b'"\xff\xfe"', b'"\xed\xa0\x80"',
    b'"\\u0000"', b'"\\u202e7H"', b'""', b'"' + b"x" * 1000 + b'"', b'"\\n\\r\\t"',
    b'"\xc3"', b'"JAM\\u0000"', b'"' + "é".encode() * 500 + b'"',
)
HOSTILE_VALUES: tuple[bytes, ...] = (
    *HOSTILE_STRINGS,
    b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-0", b"9" * 1000, b"-" + b"9" * 400,
    b"18446744073709551616", b"9007199254740993", b"1.5", b"true", b"null", b"[]", b"{}",
    b"[" * 500 + b"]" * 500, b'{"a":' * 200 + b"1" + b"}" * 200, b'["7H","7H"]',
)


def card_token(rng: random.Random) -> str:
    return rng.choice(RANKS) + rng.choice(SUITS)


def plausible_body(kind: Kind, rng: random.Random) -> dict[str, object]:
    """A body a correct device could send for ``kind``."""
    if kind in (Kind.CARD_OUT, Kind.SCAN_CARD, Kind.DELIVERED):
        return {"unreadable": True} if rng.random() < 0.05 else {"card": card_token(rng)}
    if kind == Kind.DOOR:
        return {"open": rng.random() < 0.5}
    if kind == Kind.JAM:
        return {"detail": rng.choice(["feed roller", "card stuck", ""])}
    if kind == Kind.BUTTON:
        return {"button": rng.choice(["next", "burn", "end", "x"])}
    if kind == Kind.SCAN_BEGIN:
        return {"expected": rng.choice([52, 104, 312, 416, None])}
    if kind in (Kind.SCAN_END, Kind.LOADED, Kind.SHUFFLE_DONE, Kind.DISCARDS_ACCEPTED):
        return {"count": rng.choice([0, 1, 52, 104, 311, 312, 416, 420])}
    if kind == Kind.DECK_CHECK:
        return {"cards": [card_token(rng) for _ in range(rng.choice([0, 3, 52, 104]))]}
    if kind == Kind.FAULT:
        return {"code": rng.choice(["JAM", "DOOR_OPEN", "COUNT_MISMATCH", "X" * 40,
                                    "lower", "E1"]), "detail": "fault"}
    if kind == Kind.FAULT_CLEARED:
        return {"code": rng.choice(["JAM", "DOOR_OPEN", "COUNT_MISMATCH", "E1"])}
    if kind == Kind.STATUS:
        return {"state": rng.choice(["idle", "shuffling", "fault"]), "cards": 312}
    return {}


FIELDS = ("card", "detail", "code", "count", "cards", "expected", "open", "button",
          "unreadable", "state", "ack", "nak", "reason", "from", "kind", "model", "serial")


def hostile_body(rng: random.Random) -> bytes:
    """A JSON-ish body whose fields hold hostile values (or that is not an object at all)."""
    r = rng.random()
    if r < 0.1:
        return rng.choice(HOSTILE_VALUES)  # not an object
    if r < 0.15:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
    n = rng.randrange(1, 4)
    parts = []
    for _ in range(n):
        key = rng.choice(FIELDS).encode()
        if rng.random() < 0.1:
            key = rng.choice(HOSTILE_STRINGS)[1:-1]
        value = rng.choice(HOSTILE_VALUES)
        if key == b"cards" and rng.random() < 0.5:
            value = b"[" + b",".join(rng.choice(HOSTILE_STRINGS) for _ in range(3)) + b"]"
        parts.append(b'"' + key + b'":' + value)
    return b"{" + b",".join(parts) + b"}"


def identity_body(device: str, rng: random.Random, *, refused: bool) -> dict[str, object]:
    body: dict[str, object] = {"kind": device, "model": MODEL, "serial": SERIAL,
                               "firmware": FIRMWARE, "firmware_hash": FIRMWARE_HASH}
    if refused:
        body[rng.choice(["serial", "firmware_hash", "kind", "model"])] = rng.choice(
            ["other", "sha256:00", "shoe" if device != "shoe" else "scanner"])
    return body


def line_noise(rng: random.Random, n: int) -> bytes:
    """Random bytes, a third of them start-marker halves (the worst case for a framer)."""
    out = bytearray()
    for _ in range(n):
        r = rng.random()
        out.append(START[0] if r < 0.2 else START[1] if r < 0.33 else rng.randrange(256))
    return bytes(out)


@dataclass
class WireStream:
    """One generated stream: ``chunks`` of (bytes, now) as the reader would deliver them."""

    seed: int
    device: str
    chunks: list[tuple[bytes, float]] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)  # what was put in, for a failure report

    @property
    def size(self) -> int:
        return sum(len(c) for c, _ in self.chunks)


def generate(seed: int, *, device: str | None = None, pieces: int = 40) -> WireStream:
    """The stream of ``seed``: a handshake then ``pieces`` random pieces, chunked."""
    rng = random.Random(seed)
    device = device or rng.choice(tuple(SENDS))
    stream = WireStream(seed, device)
    seq = 0
    data = bytearray()
    last = b""

    def frame(kind: int, body: dict[str, object] | bytes) -> bytes:
        nonlocal seq, last
        if isinstance(body, bytes) and len(body) > MAX_PAYLOAD:  # an oversized frame
            head = HEADER.pack(START, VERSION, seq % SEQ_MODULO, kind, min(len(body), 0xFFFF))
            last = head + body + crc16(head[2:] + body).to_bytes(2, "big")
        else:
            last = encode(seq % SEQ_MODULO, kind, body)
        seq += 1
        return last

    refused = rng.random() < 0.05
    data += frame(Kind.ACK, {"ack": 0})
    data += frame(Kind.IDENTITY, identity_body(device, rng, refused=refused))
    stream.pieces.append("handshake" + (" refused" if refused else ""))
    for _ in range(rng.randrange(pieces // 2, pieces + 1)):
        r = rng.random()
        kind = rng.choice(SENDS[device])
        if device == "shoe" and rng.random() < 0.5:
            kind = Kind.CARD_OUT  # a shoe mostly deals
        if r < 0.35:
            name, piece = "plausible", frame(kind, plausible_body(kind, rng))
        elif r < 0.55:
            name, piece = "hostile body", frame(kind, hostile_body(rng))
        elif r < 0.60:
            other = rng.choice([k for k in Kind if k not in SENDS[device]] + [0, 0x7F, 0xFF])
            name, piece = "unexpected kind", frame(other, hostile_body(rng))
        elif r < 0.68:
            name, piece = "noise", line_noise(rng, rng.randrange(1, 200))
        elif r < 0.73:
            whole = frame(kind, plausible_body(kind, rng))
            name, piece = "torn", whole[: rng.randrange(1, len(whole))]
        elif r < 0.78:
            name, piece = "bit flip", garble(frame(kind, plausible_body(kind, rng)), rng,
                                             rng.randrange(1, 4))
        elif r < 0.82:
            name, piece = "duplicate", last or frame(kind, {})
        elif r < 0.84:
            jump = rng.choice([1, 2, 7, 255, 256, 257, 1000, SEQ_MODULO - 1, 40_000])
            seq += jump
            name, piece = f"seq jump {jump}", frame(kind, plausible_body(kind, rng))
        elif r < 0.88:
            size = rng.choice([1025, 4096, 65535])
            name = f"oversized {size}"
            piece = HEADER.pack(START, VERSION, seq % SEQ_MODULO, kind, size) + bytes(
                rng.randrange(256) for _ in range(min(size, 64)))
        elif r < 0.90:
            name, flipped = "bad version", bytearray(frame(kind, {}))
            flipped[2] ^= 0x7F
            piece = bytes(flipped)
        elif r < 0.93:
            name, piece = "heartbeat", frame(Kind.HEARTBEAT, {})
        elif r < 0.96:
            name = "link message"
            link = rng.choice([Kind.ACK, Kind.NAK, Kind.RESEND, Kind.HELLO])
            body: dict[str, object] | bytes
            if rng.random() < 0.5:  # the draws in the order they always were (seeded fuzz)
                bodies: list[dict[str, object]] = [
                    {"ack": rng.randrange(-5, 70000)}, {"nak": seq, "reason": "x"},
                    {"from": 0}, {}]
                body = rng.choice(bodies)
            else:
                body = hostile_body(rng)
            piece = frame(link, body)
        else:
            name = "identity again"
            piece = frame(Kind.IDENTITY, identity_body(device, rng, refused=rng.random() < 0.5))
        stream.pieces.append(name)
        data += piece
    stream.chunks = list(_chunk(bytes(data), rng))
    return stream


def _chunk(data: bytes, rng: random.Random) -> Iterator[tuple[bytes, float]]:
    """Cut ``data`` into reads as a reader thread would see them, each with its time."""
    now, i = 0.0, 0
    while i < len(data):
        n = rng.choice([1, 2, 3, 7, 16, 64, 256, 4096])
        r = rng.random()
        now += 0.0 if r < 0.3 else rng.choice([0.001, 0.05, 0.5, 2.0, 31.0, 600.0]) \
            if r < 0.95 else 86_400.0
        yield data[i:i + n], now
        i += n
