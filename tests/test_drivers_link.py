"""The SWP/1 link state machine, pure: bytes and injected time in, typed results out.

Expected behaviour comes from docs/protocol.md: HELLO → ACK + IDENTITY; silence for 3 s
is SILENT; commands are retried with the same seq 3 times 250 ms apart, then NO_ACK; a
gap is accepted and RESEND asked from the first missing seq; a resend that does not come
is LOST_FRAMES; duplicates and out-of-order frames are dropped and reported.
"""

from __future__ import annotations

import json

import pytest

from drivers.framing import FrameDecoder, encode
from drivers.link import (
    CONTROLLER,
    LOST_FRAMES,
    NO_ACK,
    SILENT,
    CommandDone,
    Identified,
    LinkFault,
    LinkRecovered,
    Message,
    ProtocolIssue,
    ProtocolLink,
    Send,
)
from drivers.protocol import Identity, Kind

IDENT = {"kind": "shoe", "model": "SW-SHOE-1", "serial": "SH123456", "firmware": "2.4.1",
         "firmware_hash": "sha256:9f2c"}


def of(results: list, cls: type) -> list:
    return [r for r in results if isinstance(r, cls)]


def issues(results: list) -> list[str]:
    return [r.kind for r in results if isinstance(r, ProtocolIssue)]


def sent(results: list) -> list[tuple[int, int, dict]]:
    """(seq, type, body) of each frame the link wants written, decoded independently."""
    out = []
    for r in of(results, Send):
        frames = FrameDecoder().feed(r.data)
        assert len(frames) == 1
        f = frames[0]
        out.append((f.seq, f.type, json.loads(f.payload) if f.payload else {}))
    return out


def card(seq: int, c: str = "7H") -> bytes:
    return encode(seq, Kind.CARD_OUT, {"card": c})


def ready_link(**kw) -> ProtocolLink:
    """A link after a clean handshake at t=0: HELLO acked (device seq 0), IDENTITY seq 1."""
    link = ProtocolLink(**kw)
    link.connect(0.0)
    link.receive(encode(0, Kind.ACK, {"ack": 0}) + encode(1, Kind.IDENTITY, IDENT), 0.0)
    assert link.state == "ready"
    return link


# --------------------------------------------------------------------------- handshake


def test_handshake_sends_hello_and_takes_identity() -> None:
    link = ProtocolLink()
    out = link.connect(10.0)
    assert sent(out) == [(0, Kind.HELLO, {"controller": CONTROLLER})]
    assert link.state == "handshake"
    out = link.receive(encode(0, Kind.ACK, {"ack": 0}), 10.01)
    assert out == [CommandDone(0, Kind.HELLO, True)]
    out = link.receive(encode(1, Kind.IDENTITY, IDENT), 10.02)
    assert out == [Identified(Identity(**IDENT), 1)]
    assert link.state == "ready" and link.identity == Identity(**IDENT)
    assert link.tick(10.5) == []  # nothing pending: no retry of the HELLO


def test_identity_answers_the_hello_even_when_its_ack_is_lost() -> None:
    link = ProtocolLink()
    link.connect(0.0)
    link.receive(encode(0, Kind.IDENTITY, IDENT), 0.1)
    assert link.state == "ready" and link.tick(2.0) == []  # no HELLO retry, no NO_ACK


def test_identity_with_missing_fields_is_a_protocol_error_not_a_handshake() -> None:
    link = ProtocolLink()
    link.connect(0.0)
    out = link.receive(encode(0, Kind.IDENTITY, {"kind": "shoe", "model": "X"}), 0.0)
    assert issues(out) == ["bad_payload"] and link.state == "handshake"


def test_messages_before_identity_are_reported_not_delivered() -> None:
    link = ProtocolLink()
    link.connect(0.0)
    out = link.receive(card(0), 0.0)
    assert issues(out) == ["before_identity"] and not of(out, Message)


def test_hello_unanswered_is_retried_then_no_ack() -> None:
    link = ProtocolLink()
    hello = of(link.connect(0.0), Send)[0]
    retries = []
    for t in (0.25, 0.5, 0.75):
        out = link.tick(t)
        retries += of(out, Send)
    assert [r.data for r in retries] == [hello.data] * 3  # same frame, same seq
    out = link.tick(1.0)
    assert CommandDone(0, Kind.HELLO, False, "no ack") in out
    assert [f.code for f in of(out, LinkFault)] == [NO_ACK]


def test_reconnect_restarts_both_numberings() -> None:
    link = ready_link()
    link.send_command(Kind.CMD_STATUS, {}, 0.0)
    link.receive(card(2) + card(3), 0.0)
    out = link.connect(5.0)
    assert sent(out) == [(0, Kind.HELLO, {"controller": CONTROLLER})]
    # the device restarts at 0 too: no duplicate, no gap
    out = link.receive(encode(0, Kind.ACK, {"ack": 0}) + encode(1, Kind.IDENTITY, IDENT)
                       + card(2), 5.0)
    assert issues(out) == [] and len(of(out, Message)) == 1


def test_a_device_restart_mid_session_restarts_its_numbering() -> None:
    link = ready_link()
    link.receive(card(2) + card(3) + card(4), 0.0)
    out = link.receive(encode(0, Kind.IDENTITY, IDENT) + card(1), 0.5)
    assert issues(out) == [] and len(of(out, Identified)) == 1 and len(of(out, Message)) == 1


def test_the_answer_to_a_retried_hello_is_a_quiet_restart() -> None:
    """A slow device: HELLO retried before the answer came; the device answers the retry as
    a new HELLO (ACK 0, IDENTITY 1 again) after the link was ready. No protocol error, and
    the frames after it are delivered."""
    link = ProtocolLink()
    link.connect(0.0)
    assert len(of(link.tick(0.25), Send)) == 1  # the retry
    link.receive(encode(0, Kind.ACK, {"ack": 0}) + encode(1, Kind.IDENTITY, IDENT), 0.5)
    assert link.state == "ready"
    out = link.receive(encode(0, Kind.ACK, {"ack": 0}) + encode(1, Kind.IDENTITY, IDENT)
                       + card(2) + card(3, "KD"), 1.0)
    assert issues(out) == [] and [m.body["card"] for m in of(out, Message)] == ["7H", "KD"]
    assert link.counts_quiet["hello_retry_answered"] == 1 and not link.counts
    # any other ACK out of turn is still reported
    out = link.receive(encode(0, Kind.ACK, {"ack": 5}), 1.1)
    assert issues(out) != []


# --------------------------------------------------------------------------- heartbeat


def test_silence_for_the_heartbeat_timeout_is_one_silent_fault_until_a_frame_comes() -> None:
    link = ready_link()
    assert link.tick(2.99) == []
    out = link.tick(3.0)
    assert [f.code for f in of(out, LinkFault)] == [SILENT]
    assert link.tick(4.0) == []
    assert of(link.tick(10.0), LinkFault) == []  # raised once (a HELLO goes out: below)
    out = link.receive(encode(2, Kind.HEARTBEAT, {}), 10.5)
    assert of(out, LinkRecovered) == [LinkRecovered(SILENT, "frames arrive again")]
    assert link.tick(13.49) == []
    assert [f.code for f in of(link.tick(13.5), LinkFault)] == [SILENT]


def test_a_silent_device_is_asked_hello_again_and_its_identity_restarts_the_session() -> None:
    """A review: a device restarted behind its adapter (the port stayed open) says nothing
    until a HELLO; the link raised SILENT and sent nothing for good. While silent, a HELLO
    goes out every heartbeat timeout (one at a time); the device's IDENTITY answers it."""
    link = ready_link()
    assert [f.code for f in of(link.tick(3.0), LinkFault)] == [SILENT]
    assert of(link.tick(5.9), Send) == []
    (hello,) = of(link.tick(6.0), Send)
    assert hello.kind == Kind.HELLO and link.next_deadline() is not None
    assert [s.kind for s in of(link.tick(6.3), Send)] == [Kind.HELLO]  # (its retry, same seq)
    out = link.receive(encode(0, Kind.ACK, {"ack": hello.seq}) + encode(1, Kind.IDENTITY,
                                                                         IDENT), 6.4)
    assert of(out, LinkRecovered) == [LinkRecovered(SILENT, "frames arrive again")]
    assert link.state == "ready" and not link.silent


def test_silent_cleared_by_a_person_is_raised_again_if_the_device_stays_silent() -> None:
    """A review: `k shoe SILENT` cleared the fault while the link stayed silent; SILENT was
    never raised again, and the table took a dead shoe for a live one."""
    link = ready_link(retries=0)
    assert [f.code for f in of(link.tick(3.0), LinkFault)] == [SILENT]
    link.clear_fault(SILENT)
    assert link.next_deadline() == 0.0
    assert of(link.tick(4.0), LinkFault) == []  # watched again from here …
    assert [f.code for f in of(link.tick(7.0), LinkFault)] == [SILENT]  # … and raised again


def test_heartbeats_keep_the_link_alive() -> None:
    link = ready_link()
    for i, t in enumerate((1.0, 2.0, 3.0, 4.0, 5.0)):
        assert link.receive(encode(2 + i, Kind.HEARTBEAT, {}), t) == []
        assert link.tick(t + 0.99) == []
    assert link.next_deadline() == pytest.approx(8.0)


def test_no_silent_fault_before_the_handshake() -> None:
    link = ProtocolLink()
    assert link.tick(100.0) == []


# --------------------------------------------------------------------------- ack and retry


def test_command_is_retried_with_the_same_seq_three_times_then_no_ack() -> None:
    link = ready_link()
    first = of(link.send_command(Kind.CMD_SHUFFLE, {}, 1.0), Send)[0]
    assert first.seq == 1 and first.attempt == 0
    assert link.tick(1.2) == []
    attempts = []
    for t in (1.25, 1.5, 1.75):
        s = of(link.tick(t), Send)
        assert len(s) == 1 and s[0].data == first.data and s[0].seq == first.seq
        attempts.append(s[0].attempt)
    assert attempts == [1, 2, 3]
    out = link.tick(2.0)
    assert out[-1] == CommandDone(1, Kind.CMD_SHUFFLE, False, "no ack")
    assert [f.code for f in of(out, LinkFault)] == [NO_ACK]
    assert of(link.tick(3.0), Send) == []  # given up: no fourth retry
    # the next command that is answered clears NO_ACK
    link.send_command(Kind.CMD_STATUS, {}, 3.0)
    out = link.receive(encode(2, Kind.ACK, {"ack": 2}), 3.1)
    assert LinkRecovered(NO_ACK, "the device answers again") in out


def test_an_ack_after_a_retry_stops_the_retries_and_the_late_ack_is_quiet() -> None:
    link = ready_link()
    link.send_command(Kind.CMD_EJECT, {}, 0.0)
    assert len(of(link.tick(0.25), Send)) == 1
    out = link.receive(encode(2, Kind.ACK, {"ack": 1}), 0.3)
    assert out == [CommandDone(1, Kind.CMD_EJECT, True)]
    out = link.receive(encode(3, Kind.ACK, {"ack": 1}), 0.31)  # answer to the first try
    assert out == []
    assert of(link.tick(2.0), Send) == [] and of(link.tick(2.0), CommandDone) == []


def test_nak_reports_the_reason() -> None:
    link = ready_link()
    link.send_command(Kind.CMD_SHUFFLE, {}, 0.0)
    out = link.receive(encode(2, Kind.NAK, {"nak": 1, "reason": "door open"}), 0.1)
    assert out == [CommandDone(1, Kind.CMD_SHUFFLE, False, "door open")]
    assert of(link.tick(1.0), Send) == []


def test_ack_for_a_command_never_sent_is_a_stray() -> None:
    link = ready_link()
    out = link.receive(encode(2, Kind.ACK, {"ack": 999}), 0.0)
    assert issues(out) == ["stray_ack"]
    out = link.receive(encode(3, Kind.ACK, {"ack": "one"}), 0.0)
    assert issues(out) == ["bad_payload"]


def test_only_commands_can_be_sent() -> None:
    from drivers.errors import ProtocolError
    with pytest.raises(ProtocolError):
        ready_link().send_command(Kind.CARD_OUT, {"card": "7H"}, 0.0)


# --------------------------------------------------------------------------- sequence


def test_gap_asks_for_a_resend_holds_and_releases_in_order() -> None:
    link = ready_link()
    out = link.receive(card(2, "2H"), 0.0)
    assert [m.body["card"] for m in of(out, Message)] == ["2H"]
    out = link.receive(card(5, "5H"), 0.1)
    gap = [r for r in out if isinstance(r, ProtocolIssue)]
    assert [(g.kind, g.count) for g in gap] == [("gap", 2)]
    assert sent(out) == [(1, Kind.RESEND, {"from": 3})]
    assert of(out, Message) == []  # held until the hole is filled
    out = link.receive(encode(6, Kind.ACK, {"ack": 1}), 0.15)  # the RESEND acknowledged
    assert out == [CommandDone(1, Kind.RESEND, True)]  # at once, though held for order
    out = link.receive(card(3, "3H"), 0.2)
    assert of(out, Message) == []
    out = link.receive(card(4, "4H"), 0.2)
    assert [m.body["card"] for m in of(out, Message)] == ["3H", "4H", "5H"]
    # the device resends from 3 on: 5 and 6 again are expected, not errors
    out = link.receive(card(5, "5H") + encode(6, Kind.ACK, {"ack": 1}), 0.25)
    assert out == []
    assert issues(link.receive(card(5, "5H"), 0.26)) == ["duplicate"]  # but only once
    assert [r.code for r in link.tick(10.0)] == [SILENT]  # nothing else is pending


def test_a_resend_that_never_comes_is_lost_frames_then_the_held_frames() -> None:
    link = ready_link(resend_timeout=2.0)
    link.receive(card(2, "2H"), 0.0)
    link.receive(card(4, "4H") + card(5, "5H"), 0.5)
    link.receive(encode(6, Kind.HEARTBEAT, {}), 2.0)
    assert of(link.tick(2.49), LinkFault) == []
    out = link.tick(2.5)
    faults = of(out, LinkFault)
    assert [f.code for f in faults] == [LOST_FRAMES] and "seq 3" in faults[0].detail
    assert out.index(faults[0]) < out.index(of(out, Message)[0])  # the fault comes first
    assert [m.body["card"] for m in of(out, Message)] == ["4H", "5H"]
    out = link.receive(card(3, "3H"), 3.0)  # far too late
    assert issues(out) == ["late_frame"] and of(out, Message) == []


def test_a_nak_to_the_resend_is_lost_frames_at_once() -> None:
    link = ready_link()
    link.receive(card(2) + card(9), 0.0)
    out = link.receive(encode(10, Kind.NAK, {"nak": 1, "reason": "buffer gone"}), 0.1)
    assert [f.code for f in of(out, LinkFault)] == [LOST_FRAMES]
    assert len(of(out, Message)) == 1


def test_a_gap_too_wide_to_resend_is_lost_frames_at_once() -> None:
    link = ready_link()
    out = link.receive(card(2) + card(2 + 1000), 0.0)
    assert [f.code for f in of(out, LinkFault)] == [LOST_FRAMES]
    assert len(of(out, Message)) == 2 and of(out, Send) == []


def test_duplicates_and_out_of_order_frames_are_dropped_and_counted() -> None:
    link = ProtocolLink()
    link.connect(0.0)
    link.receive(encode(10, Kind.IDENTITY, IDENT), 0.0)  # the device numbers from 10
    out = link.receive(card(11) + card(12) + card(12) + card(11), 0.0)
    assert len(of(out, Message)) == 2
    assert issues(out) == ["duplicate", "duplicate"]
    out = link.receive(card(5), 0.0)  # behind, never seen
    assert issues(out) == ["out_of_order"] and of(out, Message) == []
    assert link.counts["duplicate"] == 2 and link.counts["out_of_order"] == 1
    totals = [r.total for r in link.receive(card(12), 0.0) if isinstance(r, ProtocolIssue)]
    assert totals == [3]


def test_sequence_numbers_wrap() -> None:
    link = ProtocolLink()
    link.connect(0.0)
    link.receive(encode(65534, Kind.IDENTITY, IDENT), 0.0)
    out = link.receive(card(65535) + card(0) + card(1), 0.0)
    assert issues(out) == [] and len(of(out, Message)) == 3


# --------------------------------------------------------------------------- resync, payloads


def test_resync_after_noise_and_corruption() -> None:
    link = ready_link()
    bad = bytearray(card(3, "3H"))
    bad[-1] ^= 0xFF  # CRC broken
    stream = b"\x00\x13garbage\xa5" + card(2, "2H") + bytes(bad) + card(3, "3H")
    out = []
    for i in range(0, len(stream), 7):  # any chunking
        out += link.receive(stream[i:i + 7], 0.0)
    assert [m.body["card"] for m in of(out, Message)] == ["2H", "3H"]
    kinds = issues(out)
    assert "noise" in kinds and "bad_crc" in kinds
    noise = [r for r in out if isinstance(r, ProtocolIssue) and r.kind == "noise"]
    assert sum(r.count for r in noise) == link.counts["noise"] >= 10


def test_bad_payloads_unknown_types_and_wrong_direction() -> None:
    link = ready_link()
    out = link.receive(encode(2, Kind.CARD_OUT, b"not json"), 0.0)
    assert [(r.kind, r.frame_type) for r in out] == [("bad_payload", Kind.CARD_OUT)]
    out = link.receive(encode(3, Kind.CARD_OUT, b"[1, 2]"), 0.0)
    assert issues(out) == ["bad_payload"]
    out = link.receive(encode(4, 0x7E, {}), 0.0)
    assert issues(out) == ["unknown_type"]
    out = link.receive(encode(5, Kind.CMD_SHUFFLE, {}), 0.0)
    assert issues(out) == ["unexpected_message"]
    out = link.receive(card(6), 0.0)  # the numbering was kept through all of them
    assert issues(out) == [] and len(of(out, Message)) == 1


def test_reset_with_a_hole_open_reports_the_lost_frames() -> None:
    link = ready_link()
    link.receive(card(2) + card(4), 0.0)
    out = link.reset(0.1)
    assert [f.code for f in of(out, LinkFault)] == [LOST_FRAMES]
    assert len(of(out, Message)) == 1 and link.state == "idle"


def test_a_device_jumping_its_seq_on_every_frame_costs_one_fault_and_bounded_inputs() -> None:
    """Valid frames whose seq jumps tens of thousands ahead each time: every one is a loss
    too wide to resend. Play stops on the first (LOST_FRAMES); the rest, while it is open,
    are counted through the noise throttle — a bounded number of inputs, the count exact —
    and a good card afterwards is read. (Each jump used to build a list of the whole gap and
    make an fsynced fault: a device could bury the table's log.)"""
    import random

    from controller.events import CardDrawn, DeviceDiagnostic, DeviceFault
    from drivers.shoe import ShoeDriver

    t = "2026-11-21T10:00:00.000Z"
    d = ShoeDriver("shoe", utc=lambda: t)
    d.open(0.0)
    ident = {"kind": "shoe", "model": "M", "serial": "S", "firmware": "1", "firmware_hash": "h"}
    d.feed(encode(0, Kind.ACK, {"ack": 0}) + encode(0, Kind.IDENTITY, ident), 0.0)
    rng = random.Random(1)
    expected, outs = 1, []
    for i in range(300):
        seq = (expected + rng.randrange(40_000, 65_279)) % 65_536
        outs += d.feed(encode(seq, Kind.HEARTBEAT, b""), 1.0 + i * 0.001)
        expected = (seq + 1) % 65_536
    outs += d.tick(3.0)  # a quiet window: the burst's summary
    faults = [o for o in outs if isinstance(o, DeviceFault)]
    assert [f.code for f in faults] == [LOST_FRAMES]
    reports = [o for o in outs if isinstance(o, DeviceDiagnostic)]
    assert 1 <= len(reports) <= 5
    assert reports[-1].kind == "line_noise_ended"  # the count exact: every loss after the first
    assert "lost_frames 299" in (reports[-1].detail or "")
    card = d.feed(encode(expected, Kind.CARD_OUT, {"card": "7H"}), 9.0)
    assert [type(o) for o in card] == [CardDrawn]


def test_a_damaged_frame_last_before_the_connection_ends_is_lost_frames() -> None:
    """A review: a card frame garbled on the wire (bad CRC), then the device unplugged
    before its next frame: the gap that would have shown it never came (the numbering
    restarts with the next connection), and the card was never read, with no fault."""
    garbled = bytearray(encode(2, Kind.CARD_OUT, {"card": "7H"}))
    garbled[-1] ^= 0xFF
    link = ready_link()
    link.receive(bytes(garbled), 1.0)
    (fault,) = of(link.reset(1.1), LinkFault)
    assert fault.code == LOST_FRAMES and "damaged frame (bad_crc)" in fault.detail
    link = ready_link()
    link.receive(encode(2, Kind.CARD_OUT, {"card": "7H"})[:9], 1.0)  # cut mid-frame
    (fault,) = of(link.reset(1.1), LinkFault)
    assert fault.code == LOST_FRAMES and "byte(s) of a frame unread" in fault.detail
    link = ready_link()
    link.receive(bytes(garbled) + encode(2, Kind.HEARTBEAT, {}), 1.0)  # the next frame came:
    assert of(link.reset(1.1), LinkFault) == []  # (no frame was lost: no gap showed one)


def test_noise_a_handshake_or_a_refusal_before_a_reset_is_no_lost_frame() -> None:
    """A review of the damaged-frame rule: noise ending in a start byte (held back as a
    possible frame), noise with a start marker read as a bad version, a reset during the
    handshake and a device refused at its identity raised LOST_FRAMES falsely."""
    for noise in (b"\x00\xff\x13\xa5", b"\xa5\x5a\x07\x00\x01\x02\x00\x00"):
        link = ready_link()
        link.receive(encode(2, Kind.HEARTBEAT, {}) + noise, 1.0)
        assert of(link.reset(1.1), LinkFault) == [], noise
    link = ProtocolLink()
    link.connect(0.0)
    link.receive(encode(0, Kind.CARD_OUT, {"card": "7H"})[:10], 0.1)  # before IDENTITY
    assert of(link.reset(0.2), LinkFault) == []
    link = ready_link()
    link.receive(encode(2, Kind.CARD_OUT, {"card": "7H"})[:10], 1.0)
    assert of(link.reset(1.1, refused=True), LinkFault) == []


def test_a_damaged_frame_then_the_device_restarting_is_lost_frames() -> None:
    """A review: a damaged card frame, then the device's IDENTITY (it restarted behind its
    adapter and answered a HELLO): the numbering restarts, no gap can show the card."""
    garbled = bytearray(encode(2, Kind.CARD_OUT, {"card": "7H"}))
    garbled[-1] ^= 0xFF
    link = ready_link()
    out = link.receive(bytes(garbled) + encode(0, Kind.IDENTITY, IDENT), 1.0)
    (fault,) = of(out, LinkFault)
    assert fault.code == LOST_FRAMES and "restarted after a damaged frame" in fault.detail
