"""Shoe, scanner and shuffler drivers: every device message → the input event of the mapping
table in docs/protocol.md, faults and their clearing, commands, and fuzzing.

The drivers run pure here (no transport): bytes go in with ``feed(data, now)``; what a
driver would send is in its ``outbox``. Every input event a driver produces must also be
a valid input event: it survives ``parse_event(event.to_record())`` unchanged.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.cards import deck, parse_card
from controller.events import (
    DEVICE_INFO_EVENTS,
    CardDrawn,
    CutCardSeen,
    DeckCheck,
    DeviceFault,
    DeviceOk,
    DiscardsReturned,
    Event,
    Shuffle,
    parse_event,
)
from drivers.diagnostics import DeviceDiagnostic, DeviceNotice
from drivers.errors import DeviceDisconnected
from drivers.framing import FrameDecoder, encode
from drivers.protocol import Kind
from drivers.scanner import ScannerDriver
from drivers.shoe import ShoeDriver
from drivers.shuffler import ShufflerDriver
from drivers.swp import SwpDriver
from tests.budget import examples

T = "2026-11-21T10:00:00.000Z"


def ident(kind: str) -> dict[str, str]:
    return {"kind": kind, "model": f"SW-{kind.upper()}-1", "serial": f"{kind[:2].upper()}0001",
            "firmware": "2.4.1", "firmware_hash": "sha256:9f2c"}


class Device:
    """The device side of the link: numbers its frames like a device does."""

    def __init__(self, start: int = 0) -> None:
        self.seq = itertools.count(start)

    def frame(self, kind: int, body: dict[str, Any] | bytes | None = None) -> bytes:
        return encode(next(self.seq), kind, {} if body is None else body)


def connected(cls: type[SwpDriver], **kw: Any) -> tuple[SwpDriver, Device]:
    driver = cls(cls.kind, utc=lambda: T, **kw)
    driver.open(0.0)
    dev = Device()
    out = driver.feed(dev.frame(Kind.ACK, {"ack": 0}) + dev.frame(Kind.IDENTITY, ident(cls.kind)),
                      0.0)
    assert driver.state == "ready", out
    assert not events(out)  # a first handshake raises and clears nothing
    return driver, dev


def events(out: list) -> list[Event]:
    """The play events among the outputs (not the diagnostics, not an identified device)."""
    for e in out:  # every input event, diagnostics included, is a valid input event
        if isinstance(e, Event):
            assert parse_event(e.to_record()) == e, e
    return [o for o in out if isinstance(o, Event) and o.type not in DEVICE_INFO_EVENTS]


def diags(out: list, code: str | None = None) -> list[DeviceDiagnostic | DeviceNotice]:
    return [o for o in out if isinstance(o, DeviceDiagnostic | DeviceNotice)
            and (code is None or o.code == code)]


def kinds(out: list, code: str = "PROTOCOL_ERROR") -> list[str]:
    return [d.kind for d in diags(out, code)]


def send(driver: SwpDriver, dev: Device, kind: int, body: Any = None, now: float = 0.1) -> list:
    return driver.feed(dev.frame(kind, body), now)


def fault(code: str, detail: str | None) -> DeviceFault:
    return DeviceFault(device="", code=code, detail=detail, t=T)


def codes(out: list) -> list[tuple[str, str]]:
    return [(e.type, e.code) for e in events(out) if isinstance(e, DeviceFault | DeviceOk)]


# --------------------------------------------------------------------------- shoe


@pytest.mark.parametrize(("body", "card"), [
    ({"card": "7H"}, "7H"), ({"card": "10h"}, "TH"), ({"card": "as"}, "AS"),
])
def test_shoe_card_out_is_a_card(body: dict, card: str) -> None:
    shoe, dev = connected(ShoeDriver)
    out = send(shoe, dev, Kind.CARD_OUT, body)
    assert events(out) == [CardDrawn(card=parse_card(card), t=T)]
    assert diags(out) == []


@pytest.mark.parametrize("payload", [
    {"unreadable": True}, {"card": "ZZ"}, {"card": 7}, {}, b"{not json", b"[]",
])
def test_an_unreadable_or_unusable_card_is_a_fault_never_a_drop(payload: Any) -> None:
    shoe, dev = connected(ShoeDriver)
    out = send(shoe, dev, Kind.CARD_OUT, payload)
    evs = events(out)
    assert [(e.type, e.code) for e in evs] == [("device_fault", "UNREADABLE_CARD")]
    if payload != {"unreadable": True}:
        assert kinds(out) == ["bad_payload"]
    out = send(shoe, dev, Kind.CARD_OUT, payload)  # every such card is news
    assert codes(out) == [("device_fault", "UNREADABLE_CARD")]


def test_shoe_cut_card_empty_door_jam_button() -> None:
    shoe, dev = connected(ShoeDriver)
    assert events(send(shoe, dev, Kind.CUT_CARD_OUT)) == [CutCardSeen(t=T)]
    assert codes(send(shoe, dev, Kind.SHOE_EMPTY)) == [("device_fault", "SHOE_EMPTY")]
    out = send(shoe, dev, Kind.CARD_OUT, {"card": "2C"})  # cards again: the empty shoe is over
    assert codes(out) == [("device_ok", "SHOE_EMPTY")]
    assert [e.type for e in events(out)] == ["device_ok", "card"]
    assert codes(send(shoe, dev, Kind.DOOR, {"open": True})) == [("device_fault", "DOOR_OPEN")]
    assert events(send(shoe, dev, Kind.DOOR, {"open": True})) == []  # still open: once
    assert codes(send(shoe, dev, Kind.DOOR, {"open": False})) == [("device_ok", "DOOR_OPEN")]
    assert events(send(shoe, dev, Kind.DOOR, {"open": False})) == []  # nothing was open
    out = send(shoe, dev, Kind.JAM, {"detail": "card stuck at the gate"})
    assert events(out) == [DeviceFault(device="shoe", code="JAM",
                                       detail="card stuck at the gate", t=T)]
    assert events(send(shoe, dev, Kind.JAM_CLEARED)) == [
        DeviceOk(device="shoe", code="JAM", detail="jam cleared", t=T)]
    out = send(shoe, dev, Kind.BUTTON, {"button": "deal"})
    assert events(out) == [] and [(d.kind, d.data) for d in diags(out, "NOTICE")] == [
        ("BUTTON", {"button": "deal"})]
    out = send(shoe, dev, Kind.DOOR, {"open": "yes"})
    assert kinds(out) == ["bad_payload"]
    # (a door whose state is unknown is open: play stops — a review: only a warning)
    assert codes(out) == [("device_fault", "DOOR_OPEN")]


@pytest.mark.parametrize("payload", [{"card": "ZZ"}, {}, b"{not json"])
def test_an_unusable_card_after_an_empty_shoe_leaves_the_fault_open_on_both_sides(
        payload: Any) -> None:
    """A review: the driver cleared SHOE_EMPTY before the card's payload failed, and the
    device_ok it had made was lost: the engine kept the fault open, the driver did not."""
    shoe, dev = connected(ShoeDriver)
    assert codes(send(shoe, dev, Kind.SHOE_EMPTY)) == [("device_fault", "SHOE_EMPTY")]
    out = send(shoe, dev, Kind.CARD_OUT, payload)
    assert codes(out) == [("device_fault", "UNREADABLE_CARD")]
    out = send(shoe, dev, Kind.CARD_OUT, {"card": "2C"})  # the next card clears it, once
    assert codes(out) == [("device_ok", "SHOE_EMPTY")]


def test_a_message_for_another_kind_of_device_is_a_protocol_error() -> None:
    shoe, dev = connected(ShoeDriver)
    out = send(shoe, dev, Kind.SHUFFLE_DONE, {"count": 312})
    assert events(out) == [] and kinds(out) == ["unexpected_message"]
    assert diags(out)[0].total == 1


# --------------------------------------------------------------------------- scanner


def scan(driver: SwpDriver, dev: Device, tokens: list, count: int | None = None,
         expected: int | None = 52) -> list:
    out = send(driver, dev, Kind.SCAN_BEGIN, {"expected": expected})
    for tok in tokens:
        body = {"unreadable": True} if tok is None else {"card": tok}
        out += send(driver, dev, Kind.SCAN_CARD, body)
    out += send(driver, dev, Kind.SCAN_END, {"count": len(tokens) if count is None else count})
    return out


def test_scan_begin_cards_end_is_one_deck_check() -> None:
    scanner, dev = connected(ScannerDriver)
    cards = [str(c) for c in deck()]
    out = scan(scanner, dev, cards)
    assert events(out) == [DeckCheck(cards=tuple(sorted(deck())), t=T)] and diags(out) == []


def test_scan_with_a_joker_and_an_unreadable_card() -> None:
    scanner, dev = connected(ScannerDriver)
    out = scan(scanner, dev, ["AS", "JK", None, "10d", {"bad": 1}])
    evs = events(out)
    assert [e.type for e in evs] == ["device_fault", "deck_check"]
    assert evs[0].code == "UNREADABLE_CARD" and "2 card(s) unread" in evs[0].detail
    assert evs[1] == DeckCheck(cards=(parse_card("AS"), parse_card("TD")), foreign=("JK",), t=T)
    assert kinds(out) == ["bad_payload"]


def test_scan_count_mismatch_and_scans_out_of_order() -> None:
    scanner, dev = connected(ScannerDriver)
    out = scan(scanner, dev, ["AS", "KS"], count=3)
    assert kinds(out) == ["scan_count"] and len(events(out)) == 1
    out = send(scanner, dev, Kind.SCAN_CARD, {"card": "AS"})
    assert kinds(out) == ["card_outside_scan"] and events(out) == []
    out = send(scanner, dev, Kind.SCAN_END, {"count": 0})
    assert kinds(out) == ["scan_end_without_begin"] and events(out) == []
    send(scanner, dev, Kind.SCAN_BEGIN, {"expected": None})
    send(scanner, dev, Kind.SCAN_CARD, {"card": "AS"})
    out = send(scanner, dev, Kind.SCAN_BEGIN, {"expected": 52})
    assert kinds(out) == ["scan_abandoned"]
    send(scanner, dev, Kind.SCAN_CARD, {"card": "AH"})
    out = scanner.lost("unplugged", 1.0)  # a disconnect mid-scan
    assert kinds(out) == ["scan_abandoned"] and codes(out) == [("device_fault", "DISCONNECTED")]


# --------------------------------------------------------------------------- shuffler


def test_a_device_neither_raises_nor_clears_the_drivers_own_faults() -> None:
    """UNREADABLE_CARD and LOST_FRAMES stop play until a person clears them; a device's
    FAULT_CLEARED naming one (any case) changes nothing, and a device's FAULT naming one is
    the generic FAULT, its code in the detail. The device's own codes still come and go."""
    sh, dev = connected(ShufflerDriver)
    assert codes(send(sh, dev, Kind.DELIVERED, {"unreadable": True})) == [
        ("device_fault", "UNREADABLE_CARD")]
    for code in ("UNREADABLE_CARD", "unreadable_card", "LOST_FRAMES", "SILENT", "IO_ERROR"):
        assert events(send(sh, dev, Kind.FAULT_CLEARED, {"code": code})) == []
    assert "UNREADABLE_CARD" in sh.open_faults
    out = send(sh, dev, Kind.FAULT, {"code": "LOST_FRAMES"})
    assert codes(out) == [("device_fault", "FAULT")] and "LOST_FRAMES" in str(events(out)[0])
    assert sh.clear_fault("UNREADABLE_CARD") != []  # a person may
    assert codes(send(sh, dev, Kind.FAULT, {"code": "COUNT_MISMATCH"})) == [
        ("device_fault", "COUNT_MISMATCH")]
    assert codes(send(sh, dev, Kind.FAULT_CLEARED, {"code": "count_mismatch"})) == [
        ("device_ok", "COUNT_MISMATCH")]


def test_control_characters_a_device_sends_never_reach_the_screen_raw() -> None:
    """A JAM detail (or a scanned token) with an ANSI escape, CR/LF or a bell would clear
    the dealer's screen or forge a display line where it is printed: each is written as
    \\xNN in the fault, the diagnostic and a foreign card."""
    from controller.events import deck_check

    sh, dev = connected(ShoeDriver)
    evil = "x\x1b[2J\r\n> card 7H\x07"
    (fault,) = [e for e in events(send(sh, dev, Kind.JAM, {"detail": evil}))]
    assert isinstance(fault, DeviceFault)
    assert fault.detail == "x\\x1b[2J\\x0d\\x0a> card 7H\\x07"
    assert all(c.isprintable() for c in fault.detail)
    assert deck_check(["AS", "\x1b[2JZ"], None).foreign == ("\\x1b[2JZ",)


def test_shuffler_messages() -> None:
    sh, dev = connected(ShufflerDriver)
    assert events(send(sh, dev, Kind.SHUFFLE_DONE, {"count": 312})) == [Shuffle(t=T)]
    out = send(sh, dev, Kind.DECK_CHECK, {"cards": ["AS", "2S", "JK"]})
    assert events(out) == [DeckCheck(cards=tuple(sorted([parse_card("AS"), parse_card("2S")])),
                                     foreign=("JK",), t=T)]
    assert events(send(sh, dev, Kind.DELIVERED, {"card": "QD"})) == [
        CardDrawn(card=parse_card("QD"), t=T)]
    assert codes(send(sh, dev, Kind.DELIVERED, {"unreadable": True})) == [
        ("device_fault", "UNREADABLE_CARD")]
    assert events(send(sh, dev, Kind.DISCARDS_ACCEPTED, {"count": 7})) == [
        DiscardsReturned(count=7, t=T)]
    out = send(sh, dev, Kind.FAULT, {"code": "COUNT_MISMATCH", "detail": "311 cards"})
    assert events(out) == [DeviceFault(device="shuffler", code="COUNT_MISMATCH",
                                       detail="311 cards", t=T)]
    assert events(send(sh, dev, Kind.FAULT_CLEARED, {"code": "OTHER"})) == []  # never raised
    assert codes(send(sh, dev, Kind.FAULT_CLEARED, {"code": "COUNT_MISMATCH"})) == [
        ("device_ok", "COUNT_MISMATCH")]
    assert codes(send(sh, dev, Kind.DOOR, {"open": True})) == [("device_fault", "DOOR_OPEN")]
    for kind, body in ((Kind.LOADED, {"count": 312}), (Kind.SHUFFLE_STARTED, {}),
                       (Kind.STATUS, {"state": "idle", "cards": 312})):
        out = send(sh, dev, kind, body)
        assert events(out) == [] and [(d.kind, d.data) for d in diags(out)] == [
            (kind.name, body)]
    assert sh.last_status == {"state": "idle", "cards": 312}


def test_shuffler_bad_payloads() -> None:
    sh, dev = connected(ShufflerDriver)
    out = send(sh, dev, Kind.DECK_CHECK, {"cards": "AS 2S"})
    assert events(out) == [] and kinds(out) == ["bad_payload"]
    out = send(sh, dev, Kind.DECK_CHECK, {"cards": ["AS", None]})
    assert [e.type for e in events(out)] == ["device_fault", "deck_check"]
    out = send(sh, dev, Kind.FAULT, {"code": 5})  # a fault we cannot read is still a fault
    assert codes(out) == [("device_fault", "FAULT")] and kinds(out) == ["bad_payload"]
    out = send(sh, dev, Kind.DISCARDS_ACCEPTED, {"count": -1})
    assert events(out) == [] and kinds(out) == ["bad_payload"]


def test_shuffler_joins_a_deck_check_split_in_parts() -> None:
    """A pack too big for one frame (docs/devices.md: ~200 cards) comes as DECK_CHECK parts
    ``{"cards", "part", "parts"}``; the driver joins them into one deck_check."""
    from controller.cards import pack
    from simulators.devices import BatchShuffler

    model = BatchShuffler()
    model.load([str(c) for c in pack(6)])
    model.deck_check()
    bodies = [item.body for item in model._events if item.type == Kind.DECK_CHECK]
    assert len(bodies) > 1 and bodies[0]["parts"] == len(bodies)
    sh, dev = connected(ShufflerDriver)
    out: list = []
    for body in bodies:
        out += send(sh, dev, Kind.DECK_CHECK, body)
    evs = events(out)
    assert len(evs) == 1 and isinstance(evs[0], DeckCheck) and not diags(out)
    assert sorted(str(c) for c in evs[0].cards) == sorted(str(c) for c in pack(6))
    # a part out of turn drops the check (no half check reaches the engine)
    out = send(sh, dev, Kind.DECK_CHECK, bodies[0]) + send(sh, dev, Kind.DECK_CHECK, bodies[2])
    assert events(out) == [] and kinds(out) == ["deck_check_parts"]
    # a new check starting over an unfinished one: the unfinished one is reported
    out = send(sh, dev, Kind.DECK_CHECK, bodies[0]) + send(sh, dev, Kind.DECK_CHECK, bodies[0])
    assert events(out) == [] and kinds(out) == ["deck_check_parts"]
    out = [o for b in bodies[1:] for o in send(sh, dev, Kind.DECK_CHECK, b)]
    assert [e.type for e in events(out)] == ["deck_check"]
    out = send(sh, dev, Kind.DECK_CHECK, {"cards": ["AS"], "part": 3, "parts": 2})
    assert kinds(out) == ["bad_payload"]


def sent_frames(driver: SwpDriver) -> list[tuple[int, int, dict]]:
    frames = FrameDecoder().feed(b"".join(driver.outbox))
    return [(f.seq, f.type, json.loads(f.payload) if f.payload else {}) for f in frames]


def test_shuffler_commands_ack_nak_and_no_ack() -> None:
    sh, dev = connected(ShufflerDriver)
    sh.outbox.clear()
    assert [sh.shuffle(0.0), sh.deck_check(0.0), sh.eject(0.0), sh.status(0.0)] == [1, 2, 3, 4]
    assert [t for _, t, _ in sent_frames(sh)] == [Kind.CMD_SHUFFLE, Kind.CMD_DECK_CHECK,
                                                  Kind.CMD_EJECT, Kind.CMD_STATUS]
    out = sh.feed(dev.frame(Kind.ACK, {"ack": 1}) + dev.frame(Kind.ACK, {"ack": 3})
                  + dev.frame(Kind.ACK, {"ack": 4}), 0.1)
    assert out == []
    out = send(sh, dev, Kind.NAK, {"nak": 2, "reason": "no cards loaded"})
    assert [(d.kind, d.detail) for d in diags(out, "NAK")] == [("CMD_DECK_CHECK",
                                                                "no cards loaded")]
    sh.outbox.clear()
    seq = sh.shuffle(1.0)
    out = []
    for t in (1.25, 1.5, 1.75, 2.0):
        out += sh.tick(t)
    assert [s for s, _, _ in sent_frames(sh)] == [seq] * 4  # the command and 3 retries
    assert codes(out) == [("device_fault", "NO_ACK")]
    sh.status(2.1)
    out = send(sh, dev, Kind.ACK, {"ack": seq + 1}, now=2.2)
    assert codes(out) == [("device_ok", "NO_ACK")]


def test_commands_need_a_connected_device() -> None:
    sh = ShufflerDriver("shuffler", utc=lambda: T)
    with pytest.raises(DeviceDisconnected):
        sh.shuffle(0.0)


# --------------------------------------------------------------------------- link faults


def test_silence_lost_frames_and_their_clearing() -> None:
    shoe, dev = connected(ShoeDriver)
    out = shoe.tick(3.0)
    assert codes(out) == [("device_fault", "SILENT")]
    out = send(shoe, dev, Kind.HEARTBEAT, {}, now=3.5)
    assert codes(out) == [("device_ok", "SILENT")]
    next(dev.seq)  # one frame lost on the wire
    out = send(shoe, dev, Kind.CARD_OUT, {"card": "9S"}, now=4.0)
    assert kinds(out) == ["gap"] and events(out) == []
    out = shoe.tick(4.0 + 2.0) + shoe.tick(6.0)
    assert [e.type for e in events(out)] == ["device_fault", "card"]  # the loss first
    assert events(out)[0].code == "LOST_FRAMES"
    assert shoe.open_faults.keys() >= {"LOST_FRAMES"}
    out = send(shoe, dev, Kind.HEARTBEAT, {}, now=6.1)
    assert codes(out) == []  # LOST_FRAMES waits for a person
    assert codes(shoe.clear_fault("LOST_FRAMES")) == [("device_ok", "LOST_FRAMES")]
    assert shoe.clear_fault("LOST_FRAMES") == []


def test_a_handshake_that_never_completes_is_a_disconnect() -> None:
    shoe = ShoeDriver("shoe", utc=lambda: T, handshake_timeout=3.0)
    shoe.open(0.0)
    out = []
    for t in (0.25, 0.5, 0.75, 1.0):
        out += shoe.tick(t)
    assert codes(out) == [("device_fault", "NO_ACK"), ("device_fault", "DISCONNECTED")]
    assert shoe.state == "lost"
    assert "HANDSHAKE_FAILED" in [d.kind for d in diags(out, "NOTICE")]


def test_a_good_re_handshake_clears_the_link_faults() -> None:
    shoe, dev = connected(ShoeDriver)
    out = shoe.tick(3.0) + shoe.lost("unplugged", 3.1)
    assert codes(out) == [("device_fault", "SILENT"), ("device_fault", "DISCONNECTED")]
    shoe.open(4.0)
    dev = Device()
    out = shoe.feed(dev.frame(Kind.ACK, {"ack": 0}) + dev.frame(Kind.IDENTITY, ident("shoe")),
                    4.1)
    assert sorted(codes(out)) == [("device_ok", "DISCONNECTED"), ("device_ok", "SILENT")]


# --------------------------------------------------------------------------- fuzz

CARDS = [str(c) for c in deck()]
card_strategy = st.sampled_from(CARDS)


def _feed_in_chunks(driver: SwpDriver, stream: bytes, cuts: list[int], now: float) -> list:
    out: list = []
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    for a, b in itertools.pairwise(points):
        out += driver.feed(stream[a:b], now)
    return out


def _with_noise(frames: list[bytes], noise: list[bytes]) -> bytes:
    stream = b"".join(n + f for n, f in zip(noise, frames, strict=False))
    # the device keeps talking (heartbeats): a header faked by the noise cannot hold the
    # last frames back forever. Zero bytes are noise too.
    return stream + bytes(1100)


def _no_bugs(out: list) -> None:
    assert diags(out, "DRIVER_ERROR") == []


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cls=st.sampled_from([ShoeDriver, ScannerDriver, ShufflerDriver]),
       data=st.binary(max_size=600), cuts=st.lists(st.integers(0, 700), max_size=8))
def test_arbitrary_bytes_never_raise(cls: type[SwpDriver], data: bytes, cuts: list[int]) -> None:
    driver, _ = connected(cls)
    out = _feed_in_chunks(driver, data, cuts, 0.5) + driver.tick(10.0)
    _no_bugs(out)


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 400) | st.text(max_size=4)
                     | st.sampled_from([*CARDS, "JK", "10h", ""]),
                     lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8)
_FIELDS = st.sampled_from(["card", "unreadable", "count", "code", "detail", "open", "cards",
                           "expected", "button", "state", "ack", "nak", "reason", "from",
                           "kind", "model", "serial", "firmware", "firmware_hash"])


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cls=st.sampled_from([ShoeDriver, ScannerDriver, ShufflerDriver]),
       frames=st.lists(st.tuples(
           st.sampled_from(list(Kind)) | st.integers(0, 255),
           st.dictionaries(_FIELDS, _JSON, max_size=4) | st.binary(max_size=12),
           st.none() | st.integers(0, 65535)), max_size=25))
def test_arbitrary_valid_frames_never_raise(cls: type[SwpDriver],
                                            frames: list[tuple[int, Any, int | None]]) -> None:
    driver, dev = connected(cls)
    out: list = []
    for i, (kind, body, seq) in enumerate(frames):
        s = next(dev.seq) if seq is None else seq
        out += driver.feed(encode(s, kind, body), 0.1 * i)
        out += driver.tick(0.1 * i)
    out += driver.tick(100.0) + driver.lost("end", 100.0)
    _no_bugs(out)
    events(out)  # and what came out are valid input events


def _message(kind: int, body: dict) -> tuple[int, dict]:
    return kind, body


shoe_messages = st.lists(
    card_strategy.map(lambda c: _message(Kind.CARD_OUT, {"card": c}))
    | st.just(_message(Kind.CUT_CARD_OUT, {})), min_size=1, max_size=12)
shuffler_messages = st.lists(st.one_of(
    card_strategy.map(lambda c: _message(Kind.DELIVERED, {"card": c})),
    st.integers(0, 400).map(lambda n: _message(Kind.DISCARDS_ACCEPTED, {"count": n})),
    st.just(_message(Kind.SHUFFLE_DONE, {"count": 312})),
    st.lists(card_strategy, max_size=6).map(lambda cs: _message(Kind.DECK_CHECK, {"cards": cs})),
), min_size=1, max_size=12)


def _expected(kind: int, body: dict) -> Event:
    match kind:
        case Kind.CARD_OUT | Kind.DELIVERED:
            return CardDrawn(card=parse_card(body["card"]), t=T)
        case Kind.CUT_CARD_OUT:
            return CutCardSeen(t=T)
        case Kind.DISCARDS_ACCEPTED:
            return DiscardsReturned(count=body["count"], t=T)
        case Kind.SHUFFLE_DONE:
            return Shuffle(t=T)
        case Kind.DECK_CHECK:
            return DeckCheck(cards=tuple(sorted(parse_card(c) for c in body["cards"])), t=T)
    raise AssertionError(kind)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cls_messages=st.one_of(st.tuples(st.just(ShoeDriver), shoe_messages),
                              st.tuples(st.just(ShufflerDriver), shuffler_messages)),
       noise=st.lists(st.binary(max_size=40), min_size=12, max_size=12),
       cuts=st.lists(st.integers(0, 4000), max_size=10))
def test_every_valid_frame_inside_noise_still_yields_its_event(
        cls_messages: tuple[type[SwpDriver], list[tuple[int, dict]]], noise: list[bytes],
        cuts: list[int]) -> None:
    cls, messages = cls_messages
    driver, dev = connected(cls)
    frames = [dev.frame(kind, body) for kind, body in messages]
    out = _feed_in_chunks(driver, _with_noise(frames, noise), cuts, 0.5)
    _no_bugs(out)
    assert events(out) == [_expected(k, b) for k, b in messages]
    assert "gap" not in kinds(out)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tokens=st.lists(card_strategy, max_size=60),
       noise=st.lists(st.binary(max_size=30), min_size=62, max_size=62),
       cuts=st.lists(st.integers(0, 6000), max_size=10))
def test_a_scan_inside_noise_is_still_one_deck_check(tokens: list[str], noise: list[bytes],
                                                    cuts: list[int]) -> None:
    driver, dev = connected(ScannerDriver)
    frames = [dev.frame(Kind.SCAN_BEGIN, {"expected": len(tokens)})]
    frames += [dev.frame(Kind.SCAN_CARD, {"card": c}) for c in tokens]
    frames.append(dev.frame(Kind.SCAN_END, {"count": len(tokens)}))
    out = _feed_in_chunks(driver, _with_noise(frames, noise), cuts, 0.5)
    _no_bugs(out)
    assert events(out) == [DeckCheck(cards=tuple(sorted(parse_card(c) for c in tokens)), t=T)]


def test_a_card_frame_dropped_for_its_number_is_a_card_to_read_unless_a_copy() -> None:
    """Device events are not acknowledged, so a frame under a number already used is a copy
    of the one delivered (the wire doubled it: dropped, reported) or another message — for a
    card, a card nobody read: UNREADABLE_CARD. A review: a frame from the future, its
    LOST_FRAMES cleared, made the next 100 real cards vanish as 'late' or 'duplicate'."""
    shoe, dev = connected(ShoeDriver)
    sent = [dev.frame(Kind.CARD_OUT, {"card": c}) for c in ("2C", "3C", "4C")]
    out = shoe.feed(b"".join(sent), 0.1)
    assert [str(e.card) for e in events(out)] == ["2C", "3C", "4C"]
    out = shoe.feed(sent[1], 0.2)  # the very frame again: a copy
    assert kinds(out) == ["duplicate"] and events(out) == []
    (frame,) = FrameDecoder().feed(sent[1])
    seq = frame.seq  # type: ignore[union-attr]
    out = shoe.feed(encode(seq, Kind.CARD_OUT, {"card": "KH"}), 0.3)  # another card, same seq
    assert codes(out) == [("device_fault", "UNREADABLE_CARD")]
    far = next(dev.seq) + 1000  # far ahead: the frames between are lost at once
    out = shoe.feed(encode(far, Kind.CARD_OUT, {"card": "5C"}), 0.4)
    assert ("device_fault", "LOST_FRAMES") in codes(out)
    out = shoe.feed(encode(far - 1, Kind.CARD_OUT, {"card": "6C"}), 0.5)  # one of them, late
    assert codes(out) == [("device_fault", "UNREADABLE_CARD")]


def test_naks_reach_the_log_in_bounded_number() -> None:
    """A review: a device refusing every command made one fsynced NAK diagnostic each —
    1,652 in 6 s. The first of each kind goes through at once, the rest are counted."""
    sh, dev = connected(ShufflerDriver)
    out: list = []
    for i in range(500):
        seq = sh.status(0.1 + i * 0.001)
        out += send(sh, dev, Kind.NAK, {"nak": seq, "reason": "busy"}, now=0.1 + i * 0.001)
    out += sh.tick(5.0)  # a quiet window: the burst's summary
    naks = diags(out, "NAK")
    assert naks[0].kind == "CMD_STATUS" and naks[0].detail == "busy"
    assert len(naks) <= 5, [(d.kind, d.detail) for d in naks]
    assert naks[-1].kind == "naks_ended" and naks[-1].detail.startswith("500 NAK(s)")


def test_silent_cleared_by_a_person_at_the_driver_comes_back_and_probes_raise_no_no_ack(
        ) -> None:
    """A review of the first fix: the person's clearing reached the driver only (the link
    stayed silent: SILENT never came back), and the HELLO probes' missing ACKs raised a
    NO_ACK that stayed on after the device simply went on sending."""
    shoe, dev = connected(ShoeDriver)
    assert ("device_fault", "SILENT") in codes(shoe.tick(3.5))
    out = []
    for t in (7.0, 7.3, 7.6, 7.9, 8.2, 11.0, 11.5, 12.0):  # probes and their retries
        out += shoe.tick(t)
    assert codes(out) == []  # no NO_ACK for a probe
    assert codes(shoe.clear_fault("SILENT")) == [("device_ok", "SILENT")]
    shoe.tick(12.5)
    assert ("device_fault", "SILENT") in codes(shoe.tick(16.0))  # raised again
    out = send(shoe, dev, Kind.HEARTBEAT, {}, now=16.5)  # the device goes on: SILENT over
    assert codes(out) == [("device_ok", "SILENT")]
    assert "NO_ACK" not in shoe.open_faults


def test_each_nak_reason_is_heard_and_an_unplug_reports_the_naks_counted() -> None:
    """A review of the throttle: a second reason ('door open') in a burst of the first
    ('busy') never reached the log; NAKs still counted at an unplug were reported only
    after a reconnect."""
    sh, dev = connected(ShufflerDriver)
    out: list = []
    for i, reason in enumerate(["busy", "busy", "door open", "busy"]):
        seq = sh.shuffle(0.1 + i * 0.1)
        out += send(sh, dev, Kind.NAK, {"nak": seq, "reason": reason}, now=0.1 + i * 0.1)
    assert [(d.kind, d.detail) for d in diags(out, "NAK")] == [
        ("CMD_SHUFFLE", "busy"), ("CMD_SHUFFLE", "door open")]
    out = sh.lost("unplugged", 0.6)
    assert [d.kind for d in diags(out, "NAK")][-1] == "naks_ended"
