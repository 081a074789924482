"""The framer, bytes in and frames out, with no I/O: every malformation, and fuzzing."""

from __future__ import annotations

import binascii
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drivers.framing import (
    MAX_PAYLOAD,
    Frame,
    FrameDecoder,
    FramingError,
    SequenceChecker,
    encode,
)
from tests.budget import examples


def frames(out: list) -> list[Frame]:
    return [x for x in out if isinstance(x, Frame)]


def errors(out: list) -> list[str]:
    return [x.kind for x in out if isinstance(x, FramingError)]


def test_layout_is_as_documented() -> None:
    raw = encode(0x0102, 0x10, {"card": "7H"})
    payload = b'{"card":"7H"}'
    assert raw[:2] == b"\xa5\x5a" and raw[2] == 1
    assert struct.unpack(">HBH", raw[3:8]) == (0x0102, 0x10, len(payload))
    assert raw[8:-2] == payload
    # CRC-16/CCITT-FALSE over version..payload, computed here independently of the framer
    assert struct.unpack(">H", raw[-2:])[0] == binascii.crc_hqx(raw[2:-2], 0xFFFF)
    assert binascii.crc_hqx(b"123456789", 0xFFFF) == 0x29B1  # the standard check value


def test_round_trip_in_any_chunking() -> None:
    stream = b"".join(encode(i, 0x10, {"card": c}) for i, c in enumerate(["AS", "TD", "7H"]))
    for size in (1, 2, 3, 7, 64):
        d = FrameDecoder()
        out: list = []
        for i in range(0, len(stream), size):
            out += d.feed(stream[i:i + size])
        assert [f.body()["card"] for f in frames(out)] == ["AS", "TD", "7H"]
        assert errors(out) == []


def test_noise_between_frames_is_reported_and_skipped() -> None:
    out = FrameDecoder().feed(b"\x00\xff" + encode(1, 0x11) + b"garbage\xa5" + encode(2, 0x11))
    assert [f.seq for f in frames(out)] == [1, 2]
    assert errors(out) == ["noise", "noise"]


def test_bad_crc_drops_the_frame_and_resyncs() -> None:
    bad = bytearray(encode(1, 0x10, {"card": "AS"}))
    bad[-1] ^= 0xFF
    out = FrameDecoder().feed(bytes(bad) + encode(2, 0x10, {"card": "KD"}))
    assert [f.seq for f in frames(out)] == [2]
    assert "bad_crc" in errors(out)


def test_truncated_frame_followed_by_a_good_one() -> None:
    out = FrameDecoder().feed(encode(1, 0x10, {"card": "AS"})[:11] + encode(2, 0x11))
    assert [f.seq for f in frames(out)] == [2]
    assert errors(out)[0] == "truncated"


def test_oversized_length_is_refused() -> None:
    raw = bytearray(encode(1, 0x10, {"card": "AS"}))
    raw[6:8] = (MAX_PAYLOAD + 1).to_bytes(2, "big")
    out = FrameDecoder().feed(bytes(raw) + encode(2, 0x11))
    assert [f.seq for f in frames(out)] == [2]
    assert errors(out)[0] == "oversized"
    with pytest.raises(ValueError):
        encode(1, 0x10, b"x" * (MAX_PAYLOAD + 1))


def test_bad_version() -> None:
    out = FrameDecoder().feed(encode(1, 0x11, version=9) + encode(2, 0x11))
    assert [f.seq for f in frames(out)] == [2]
    assert errors(out)[0] == "bad_version"


def test_partial_frame_waits() -> None:
    d = FrameDecoder()
    raw = encode(5, 0x10, {"card": "AS"})
    assert d.feed(raw[:-3]) == []
    assert d.pending() == len(raw) - 3
    assert frames(d.feed(raw[-3:]))[0].seq == 5


def test_sequence_checker() -> None:
    s = SequenceChecker()
    assert s.check(10) == (True, None)
    assert s.check(11) == (True, None)
    ok, issue = s.check(14)
    assert ok and issue and issue.kind == "gap" and issue.missing == 2
    ok, issue = s.check(14)
    assert not ok and issue and issue.kind == "duplicate"
    ok, issue = s.check(12)
    assert not ok and issue and issue.kind == "out_of_order"
    assert s.check(15) == (True, None)
    s2 = SequenceChecker()
    s2.check(0xFFFF)
    assert s2.check(0) == (True, None)  # wraps at 2**16


payloads = st.dictionaries(st.sampled_from(["card", "code", "count", "detail"]),
                           st.one_of(st.text(max_size=20), st.integers(0, 400)), max_size=3)


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=600), st.integers(1, 50))
def test_fuzz_arbitrary_bytes_never_raise(data: bytes, chunk: int) -> None:
    d = FrameDecoder()
    for i in range(0, len(data), chunk):
        for item in d.feed(data[i:i + chunk]):
            assert isinstance(item, Frame | FramingError)
    assert d.pending() < len(data) + 1


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=40), payloads), min_size=1, max_size=8),
       st.integers(1, 64))
def test_fuzz_valid_frames_inside_noise_are_all_found(
    parts: list[tuple[bytes, dict]], chunk: int
) -> None:
    stream = b""
    for seq, (noise, body) in enumerate(parts):
        stream += noise + encode(seq, 0x21, body)
    stream += encode(len(parts), 0x03)  # a trailing frame flushes any partial noise header
    d = FrameDecoder()
    out: list = []
    for i in range(0, len(stream), chunk):
        out += d.feed(stream[i:i + chunk])
    found = [(f.seq, f.body()) for f in frames(out)]
    expected = [(seq, body) for seq, (_, body) in enumerate(parts)]
    # every real frame is found, in order (noise may by chance also form a frame: CRC 1/65536)
    assert [x for x in found if x in expected] == expected


def test_protocol_doc_example_and_message_table() -> None:
    from pathlib import Path

    from drivers.protocol import Kind

    doc = (Path(__file__).resolve().parent.parent / "docs" / "protocol.md").read_text()
    assert encode(258, 0x10, {"card": "7H"}).hex(" ") in doc
    for kind in Kind:
        assert f"| 0x{kind.value:02x} | {kind.name} |" in doc, kind.name


# --- resynchronisation on every start marker (issue 8) --------------------------------

CARD = encode(5, 0x10, {"card": "AS"})


def feed_in_chunks(data: bytes, cuts: list[int]) -> tuple[list[Frame], int]:
    """Feed ``data`` cut at ``cuts``; the frames found and the bytes left pending."""
    d = FrameDecoder()
    out: list = []
    last = 0
    for cut in [*sorted({c for c in cuts if 0 < c < len(data)}), len(data)]:
        out += d.feed(data[last:cut])
        last = cut
    return frames(out), d.pending()


def test_a_card_after_a_torn_header_is_found_at_once() -> None:
    # the torn header's length field (01 00: 256 bytes) reaches past the card: the card
    # must not wait for bytes that will never come
    for torn in (b"\xa5\x5a\x01", b"\xa5\x5a\x01\x00", b"\xa5\x5a\x01\x00\x00\x10\x00"):
        d = FrameDecoder()
        out = d.feed(torn + CARD)
        assert frames(out) == [Frame(5, 0x10, b'{"card":"AS"}')], torn.hex()
        assert "truncated" in errors(out) or "bad_crc" in errors(out)
        assert d.pending() == 0


def test_every_torn_prefix_of_a_frame_then_a_frame() -> None:
    other = encode(0x0100, 0x12, {"round": 1, "detail": "x" * 40})
    for k in range(1, len(other)):
        for data in (other[:k] + CARD, b"\xa5" + other[:k] + CARD):
            found, pending = feed_in_chunks(data, [])
            assert found and found[-1] == Frame(5, 0x10, b'{"card":"AS"}'), k
            assert pending == 0


_noisy_byte = st.sampled_from([0xA5, 0x5A, 0x00, 0x01, 0x04, 0x10]) | st.integers(0, 255)
_piece = st.one_of(
    st.binary(max_size=12),
    st.lists(_noisy_byte, max_size=12).map(bytes),
    st.builds(lambda s, t, n: encode(s, t, {"n": "x" * n}), st.integers(0, 0xFFFF),
              st.integers(0, 255), st.integers(0, 40)),
    st.builds(lambda s, n, k: encode(s, 0x10, {"n": "y" * n})[:k], st.integers(0, 0xFFFF),
              st.integers(0, 40), st.integers(1, 20)),
    st.just(b"\xa5\x5a\x01"),
    st.just(b"\xa5\x5a\x01\x00"),
)


@settings(max_examples=examples(400), deadline=None)
@given(pieces=st.lists(_piece, max_size=12), cuts=st.lists(st.integers(0, 600), max_size=30))
def test_frames_found_never_depend_on_chunking(pieces: list[bytes], cuts: list[int]) -> None:
    data = b"".join(pieces)
    assert feed_in_chunks(data, cuts) == feed_in_chunks(data, [])
    assert feed_in_chunks(data, list(range(len(data)))) == feed_in_chunks(data, [])


@settings(max_examples=examples(400), deadline=None)
@given(noise=st.lists(_piece, max_size=10).map(b"".join), cuts=st.lists(st.integers(0, 600)),
       seq=st.integers(0, 0xFFFF))
def test_a_valid_frame_after_any_noise_is_found(noise: bytes, cuts: list[int], seq: int) -> None:
    frame = encode(seq, 0x10, {"card": "QH"})
    found, pending = feed_in_chunks(noise + frame, cuts)
    assert found and found[-1] == Frame(seq, 0x10, b'{"card":"QH"}')
    assert pending == 0  # found without waiting for any later byte


def test_the_buffer_never_holds_more_than_one_frame() -> None:
    from drivers.framing import MAX_FRAME
    d = FrameDecoder()
    head = struct.pack(">2sBHBH", b"\xa5\x5a", 1, 0, 0x10, MAX_PAYLOAD)
    d.feed(head)
    for _ in range(5000):
        d.feed(b"{")  # ASCII filler never completes a frame of its own
        assert d.pending() <= MAX_FRAME


def _ending_in_a5(type_: int = 0x10, body: dict[str, str] | None = None) -> bytes:
    """A frame whose CRC's last byte is 0xA5 (one seq in 256 gives one)."""
    return next(f for s in range(0x10000)
                if (f := encode(s, type_, body if body is not None else {"n": ""}))[-1] == 0xA5)


def test_a_frame_after_one_torn_a_byte_short_is_still_found() -> None:
    # a frame torn one byte short whose missing CRC byte was 0xA5: the next frame's start
    # byte completes it, so it decodes (a CRC match by chance) — and the next frame, which
    # begins with that same byte, is found too, at once
    torn = _ending_in_a5()[:-1]
    card = encode(7, 0x10, {"card": "QH"})
    for cuts in ([], list(range(1, len(torn) + len(card)))):
        found, pending = feed_in_chunks(torn + card, cuts)
        assert found[-1] == Frame(7, 0x10, b'{"card":"QH"}') and pending == 0


def test_a_frame_ending_in_a5_and_the_next_are_both_found_with_no_noise() -> None:
    first = _ending_in_a5()
    card = encode(8, 0x10, {"card": "2S"})
    d = FrameDecoder()
    out = d.feed(first) + d.feed(card)
    assert out == [Frame(decode_seq(first), 0x10, b'{"n":""}'), Frame(8, 0x10, b'{"card":"2S"}')]
    assert d.pending() == 0
    # and followed by bytes that are no frame: the frame stands, the rest is noise
    d = FrameDecoder()
    out = d.feed(first + b"\x5a\x00garbage")
    assert out[0] == Frame(decode_seq(first), 0x10, b'{"n":""}')
    assert all(isinstance(o, FramingError) for o in out[1:])


def decode_seq(frame: bytes) -> int:
    return int.from_bytes(frame[3:5], "big")
