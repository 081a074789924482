"""Every fault kind has its effect on the wire, and every dealer mistake makes the engine
raise its deviation."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from controller.cards import pack
from controller.deviations import Deviation
from controller.engine import TableEngine
from controller.events import parse_event
from controller.profiles import load_profile
from drivers.framing import Frame, FrameDecoder, FramingError, SequenceChecker, encode
from drivers.protocol import Identity, Kind
from simulators.dealer import table_day
from simulators.devices import BatchShuffler, ContinuousShuffler, Device, Scanner, Shoe
from simulators.faults import (
    FAULT_KINDS,
    MISTAKES,
    Fault,
    FaultError,
    Mistake,
    apply_mistakes,
    garble,
    make_fault,
    noise,
)

DECK = [str(c) for c in pack(1)]


def fault(kind: str, device: str = "shoe", **kw: Any) -> Fault:
    return make_fault({"kind": kind, "device": device, **kw})


def greeted(dev: Device) -> Device:
    dev.receive(encode(0, Kind.HELLO, {}), 0.0)
    dev.tick(0.0)  # ACK, IDENTITY: frames 0 and 1
    return dev


def shoe_with(*faults: Fault, cards: list[str] | None = None) -> Shoe:
    shoe = greeted(Shoe(rng=random.Random(1), faults=faults))
    shoe.load(cards or DECK)
    return shoe


def decode(data: bytes) -> tuple[list[Frame], list[FramingError]]:
    frames, errors = [], []
    for item in FrameDecoder().feed(data):
        (frames if isinstance(item, Frame) else errors).append(item)
    return frames, errors


def cards_of(frames: list[Frame]) -> list[str]:
    return [f.body().get("card", "?") for f in frames if f.type in (Kind.CARD_OUT,
                                                                   Kind.DELIVERED)]


FAULT_TESTS: Counter[str] = Counter()


def covers(kind: str):
    FAULT_TESTS[kind] += 1
    return lambda fn: fn


# --------------------------------------------------------------------------- wire faults


@covers("garble")
@pytest.mark.parametrize("bits", [1, 3, 8])
def test_garbled_frame_fails_its_crc(bits: int) -> None:
    shoe = shoe_with(fault("garble", card=3, bits=bits))
    for _ in range(5):
        shoe.draw()
    frames, errors = decode(shoe.tick(0.0))
    assert cards_of(frames) == [DECK[0], DECK[1], DECK[3], DECK[4]]
    assert errors and errors[0].kind == "bad_crc" and "seq 4" in errors[0].detail
    assert all(e.kind in ("bad_crc", "noise") for e in errors)


def test_garble_flips_exactly_the_bits_asked_and_keeps_the_header() -> None:
    frame = encode(9, Kind.CARD_OUT, {"card": "7H"})
    for bits in range(1, 9):
        out = garble(frame, random.Random(bits), bits)
        assert out[:8] == frame[:8] and len(out) == len(frame)
        assert sum(bin(a ^ b).count("1") for a, b in zip(out, frame, strict=True)) == bits


@covers("drop")
def test_dropped_frame_leaves_a_gap_that_resend_fills() -> None:
    shoe = shoe_with(fault("drop", card=2))
    for _ in range(3):
        shoe.draw()
    frames, errors = decode(shoe.tick(0.0))
    assert not errors and [f.seq for f in frames] == [2, 4]
    check = SequenceChecker()
    for seq in (0, 1, 2):
        check.check(seq)
    ok, issue = check.check(4)
    assert ok and issue is not None and issue.kind == "gap" and issue.missing == 1
    shoe.receive(encode(1, Kind.RESEND, {"from": 3}), 0.0)
    again, _ = decode(shoe.tick(0.0))
    assert again[0].type == Kind.ACK
    assert [(f.seq, f.body()) for f in again[1:]] == [(3, {"card": DECK[1]}),
                                                      (4, {"card": DECK[2]})]


@covers("duplicate")
def test_duplicated_frame_repeats_its_seq() -> None:
    shoe = shoe_with(fault("duplicate", card=1))
    shoe.draw()
    shoe.draw()
    frames, _ = decode(shoe.tick(0.0))
    assert [f.seq for f in frames] == [2, 2, 3] and frames[0] == frames[1]
    check = SequenceChecker()
    results = [check.check(s) for s in (0, 1, 2, 2, 3)]
    assert results[3][1] is not None and results[3][1].kind == "duplicate"


@covers("noise")
def test_noise_before_a_frame() -> None:
    shoe = shoe_with(fault("noise", card=1, bytes=40))
    shoe.draw()
    data = shoe.tick(0.0)
    frames, errors = decode(data)
    assert cards_of(frames) == [DECK[0]]
    assert [(e.kind, e.size) for e in errors] == [("noise", 40)]
    assert 0xA5 not in noise(random.Random(0), 10_000)


@covers("oversized")
def test_oversized_frame_is_rejected_and_the_next_frame_found() -> None:
    shoe = shoe_with(fault("oversized", card=1, size=1500))
    shoe.draw()
    data = shoe.tick(0.0)
    assert len(data) > 1500
    frames, errors = decode(data)
    assert cards_of(frames) == [DECK[0]] and frames[0].seq == 2
    assert errors[0].kind == "oversized" and "1500" in errors[0].detail


@covers("garble")
def test_time_triggered_wire_fault_hits_the_next_frame_even_a_heartbeat() -> None:
    shoe = shoe_with(fault("garble", time=2.5))
    assert decode(shoe.tick(1.0))[0][0].type == Kind.HEARTBEAT
    assert shoe.tick(2.0)  # not yet
    frames, errors = decode(shoe.tick(3.0))
    assert frames == [] and errors[0].kind == "bad_crc"  # the heartbeat at 3.0
    assert decode(shoe.tick(4.0))[0][0].seq == 5


# --------------------------------------------------------------------------- pause faults


@covers("jam")
def test_jam_before_the_card_then_cleared_after_its_seconds() -> None:
    shoe = shoe_with(fault("jam", card=2, seconds=2.0, detail="gate"))
    shoe.draw()
    shoe.draw()
    shoe.draw()
    frames, _ = decode(shoe.tick(10.0))
    assert [(Kind(f.type).name, f.body()) for f in frames] == [
        ("CARD_OUT", {"card": DECK[0]}), ("JAM", {"detail": "gate"})]
    assert decode(shoe.tick(11.0))[0][0].type == Kind.HEARTBEAT  # alive, still jammed
    assert decode(shoe.tick(11.9))[0] == []
    frames, _ = decode(shoe.tick(12.0))
    assert [(Kind(f.type).name, f.body()) for f in frames] == [
        ("JAM_CLEARED", {}), ("CARD_OUT", {"card": DECK[1]}), ("CARD_OUT", {"card": DECK[2]})]


@covers("jam")
def test_shuffler_jam_is_a_fault_code() -> None:
    sh = greeted(ContinuousShuffler(rng=random.Random(1), faults=[
        fault("jam", "shuffler", card=1, seconds=1.0)]))
    sh.load(DECK)
    sh.deliver()
    frames, _ = decode(sh.tick(0.0) + sh.tick(1.0))
    assert [(Kind(f.type).name, f.body()) for f in frames[1:]] == [
        ("FAULT", {"code": "JAM", "detail": "card jammed at the exit"}),
        ("FAULT_CLEARED", {"code": "JAM"}), ("DELIVERED", {"card": DECK[0]})]


@covers("door")
@pytest.mark.parametrize("cls", [Shoe, BatchShuffler])
def test_door_open_then_closed(cls: type[Device]) -> None:
    dev = greeted(cls(rng=random.Random(1), faults=[
        fault("door", cls.kind, time=5.0, seconds=1.0)]))
    assert [f.type for f in decode(dev.tick(4.99))[0]] == [Kind.HEARTBEAT]
    frames, _ = decode(dev.tick(5.0))
    assert [(Kind(f.type).name, f.body()) for f in frames] == [("DOOR", {"open": True})]
    assert decode(dev.tick(6.0))[0][0].body() == {"open": False}
    assert dev.events_emitted == 2


@covers("silent")
def test_silent_device_sends_nothing_for_n_seconds() -> None:
    shoe = shoe_with(fault("silent", card=3, seconds=5.0))
    for _ in range(4):
        shoe.draw()
    first, _ = decode(shoe.tick(1.0))
    assert cards_of(first) == DECK[:2]
    for t in (1.5, 2.0, 3.0, 4.0, 5.0, 5.99):
        shoe.receive(encode(1, Kind.CMD_STATUS, {}), t)
        assert shoe.tick(t) == b"", t  # no heartbeat, no ACK, nothing
    frames, _ = decode(shoe.tick(6.0))
    assert cards_of(frames) == DECK[2:4]
    assert frames[0].type == Kind.NAK  # the held answer first (a shoe NAKs the command)


@covers("slow")
def test_slow_device_answers_late() -> None:
    sh = greeted(BatchShuffler(rng=random.Random(1), faults=[
        fault("slow", "shuffler", time=1.0, delay=0.5, seconds=3.0)]))
    sh.tick(1.0)  # heartbeat; slow from here
    sh.receive(encode(1, Kind.CMD_STATUS, {}), 1.1)
    assert sh.tick(1.1) == b"" and sh.tick(1.59) == b""
    frames, _ = decode(sh.tick(1.6))
    assert [Kind(f.type).name for f in frames] == ["ACK", "STATUS"]
    sh.receive(encode(2, Kind.CMD_STATUS, {}), 5.0)  # slow spell over
    assert [Kind(f.type).name for f in decode(sh.tick(5.0))[0]] == ["ACK", "STATUS"]


@covers("disconnect")
def test_disconnect_stops_the_link_until_reset_and_hello() -> None:
    shoe = shoe_with(fault("disconnect", card=2, seconds=1.5))
    shoe.draw()
    shoe.draw()
    frames, _ = decode(shoe.tick(0.0))
    assert cards_of(frames) == [DECK[0]]
    assert shoe.link_down == 1.5 and not shoe.greeted
    assert shoe.tick(5.0) == b""
    shoe.link_reset()
    assert shoe.link_down is None and shoe.tick(6.0) == b""  # waits for HELLO
    shoe.receive(encode(0, Kind.HELLO, {}), 6.0)
    frames, _ = decode(shoe.tick(6.0))
    assert [(f.seq, Kind(f.type).name) for f in frames] == [(0, "ACK"), (1, "IDENTITY"),
                                                             (2, "CARD_OUT")]
    assert cards_of(frames) == [DECK[1]]  # the held card is not lost


@covers("wrong_identity")
def test_wrong_identity_at_the_next_handshake() -> None:
    shoe = Shoe(rng=random.Random(1), faults=[fault("wrong_identity", time=0)])
    shoe.receive(encode(0, Kind.HELLO, {}), 0.0)
    ident = Identity.from_body(decode(shoe.tick(0.0))[0][1].body())
    assert ident.serial == "FOREIGN-SH000001" and ident.model == "SW-SHOE-1"
    other = greeted(Shoe(rng=random.Random(1), faults=[
        fault("wrong_identity", card=1, firmware="9.9", firmware_hash="sha256:ff")]))
    other.load(DECK)
    other.draw()
    other.tick(0.0)
    other.receive(encode(0, Kind.HELLO, {}), 1.0)
    ident = Identity.from_body(decode(other.tick(1.0))[0][1].body())
    assert (ident.serial, ident.firmware, ident.firmware_hash) == ("SH000001", "9.9",
                                                                   "sha256:ff")


# --------------------------------------------------------------------------- content faults


@covers("unreadable")
@pytest.mark.parametrize("cls", [Shoe, ContinuousShuffler])
def test_unreadable_card(cls: type[Device]) -> None:
    dev = greeted(cls(rng=random.Random(1), faults=[fault("unreadable", cls.kind, card=2)]))
    dev.load(DECK)  # type: ignore[attr-defined]
    out = [dev.draw() if isinstance(dev, Shoe) else dev.deliver() for _ in range(3)]  # type: ignore
    assert out == DECK[:3]  # the card still left the device
    frames, _ = decode(dev.tick(0.0))
    bodies = [f.body() for f in frames if f.type in (Kind.CARD_OUT, Kind.DELIVERED)]
    assert bodies == [{"card": DECK[0]}, {"unreadable": True}, {"card": DECK[2]}]


@covers("unreadable")
def test_unreadable_card_in_a_scan() -> None:
    sc = greeted(Scanner(rng=random.Random(1), faults=[fault("unreadable", "scanner", card=5)]))
    assert sc.scan(DECK)[4] == "?"
    frames, _ = decode(sc.tick(0.0))
    assert frames[5].body() == {"unreadable": True} and frames[-1].body() == {"count": 52}


@covers("foreign")
def test_foreign_card_in_a_scan_and_a_given_face() -> None:
    sc = greeted(Scanner(rng=random.Random(1), faults=[
        fault("foreign", "scanner", card=52), fault("foreign", "scanner", card=53, face="7H")]))
    sc.scan(DECK)
    sc.scan(DECK)
    frames, _ = decode(sc.tick(0.0))
    scans = [f.body() for f in frames if f.type == Kind.SCAN_CARD]
    assert scans[51] == {"card": "JK"} and scans[53] == {"card": "7H"}
    assert [f.body()["count"] for f in frames if f.type == Kind.SCAN_END] == [53, 53]


@covers("foreign")
def test_foreign_card_from_a_shoe_duplicates_a_face_already_dealt() -> None:
    shoe = shoe_with(fault("foreign", card=4), cards=["AS", "KD", "AS", "7H", "2C"])
    for _ in range(5):
        shoe.draw()
    frames, _ = decode(shoe.tick(0.0))
    assert cards_of(frames) == ["AS", "KD", "AS", "AS", "7H", "2C"]
    assert shoe.counters["card"] == 5 and shoe.events_emitted == 6


@covers("foreign")
def test_foreign_card_from_a_continuous_shuffler() -> None:
    sh = greeted(ContinuousShuffler(rng=random.Random(1), faults=[
        fault("foreign", "shuffler", card=2, face="QS")]))
    sh.load(DECK)
    sh.deliver()
    sh.deliver()
    assert cards_of(decode(sh.tick(0.0))[0]) == [DECK[0], "QS", DECK[1]]


@covers("missing")
def test_missing_card_in_a_scan() -> None:
    sc = greeted(Scanner(rng=random.Random(1), faults=[fault("missing", "scanner", card=10)]))
    assert sc.scan(DECK) == DECK[:9] + DECK[10:]
    frames, _ = decode(sc.tick(0.0))
    assert [f.body()["card"] for f in frames if f.type == Kind.SCAN_CARD] == DECK[:9] + DECK[10:]
    assert frames[-1].body() == {"count": 51}


@covers("missing")
def test_missing_card_in_a_shuffler_deck_check() -> None:
    sh = greeted(BatchShuffler(rng=random.Random(1), faults=[
        fault("missing", "shuffler", shuffle=1)]))
    sh.load(DECK)
    sh.shuffle()
    sh.deck_check()
    sh.deck_check()
    checks = [f.body()["cards"] for f in decode(sh.tick(0.0))[0] if f.type == Kind.DECK_CHECK]
    assert len(checks[0]) == 51 and len(checks[1]) == 52
    assert Counter(DECK) - Counter(checks[0]) != Counter()


@covers("unshuffled")
def test_unshuffled_shuffler_returns_the_input_order() -> None:
    sh = greeted(BatchShuffler(rng=random.Random(1), faults=[
        fault("unshuffled", "shuffler", shuffle=2)]))
    sh.load(DECK)
    first = sh.shuffle()
    assert first != DECK
    sh.eject()
    sh.load(DECK)
    assert sh.shuffle() == DECK  # reported as shuffled, but in the order it went in
    assert sh.eject() == DECK
    frames, _ = decode(sh.tick(0.0))
    assert [Kind(f.type).name for f in frames].count("SHUFFLE_DONE") == 2


@covers("unshuffled")
def test_unshuffled_continuous_shuffler_delivers_in_load_order() -> None:
    sh = greeted(ContinuousShuffler(rng=random.Random(1), faults=[
        fault("unshuffled", "shuffler", time=0)]))
    sh.load(DECK)
    sh.tick(0.0)
    sh.shuffle()
    assert [sh.deliver() for _ in range(52)] == DECK


@covers("riffle")
def test_riffle_fault_leaves_the_rising_sequences_of_a_riffle() -> None:
    from controller.screening.rising import rising_sequences
    sh = greeted(BatchShuffler(rng=random.Random(1), faults=[
        fault("riffle", "shuffler", shuffle=1, times=2)]))
    sh.load(DECK)
    out = sh.shuffle()
    assert sorted(out) == sorted(DECK) and out != DECK
    assert rising_sequences([DECK.index(c) for c in out]) <= 4  # 2 riffles: 4 packets at most
    frames, _ = decode(sh.tick(0.0))
    assert [Kind(f.type).name for f in frames].count("SHUFFLE_DONE") == 1


@covers("shelf")
def test_shelf_fault_is_one_pass_of_a_shelf_shuffler() -> None:
    sh = greeted(BatchShuffler(rng=random.Random(2), faults=[
        fault("shelf", "shuffler", shuffle=1, shelves=4)]))
    sh.load(DECK)
    out = [DECK.index(c) for c in sh.shuffle()]
    assert sorted(out) == list(range(52)) and out != list(range(52))
    # each shelf unloads as a falling then a rising run: at most 2 × 4 monotone runs
    turns = sum(1 for a, b, c in zip(out, out[1:], out[2:], strict=False)
                if (b - a) * (c - b) < 0)
    assert turns <= 2 * 4 * 2


@covers("slug")
def test_slug_fault_keeps_a_run_of_the_last_pack() -> None:
    sh = greeted(BatchShuffler(rng=random.Random(3), faults=[
        fault("slug", "shuffler", shuffle=2, cards=10, start=5, at=20)]))
    sh.load(DECK)
    last = sh.shuffle()
    sh.eject()
    sh.load(DECK)
    out = sh.shuffle()
    assert sorted(out) == sorted(DECK)
    assert out[19:29] == last[4:14]


def test_every_fault_kind_has_a_wire_test() -> None:
    assert set(FAULT_TESTS) == set(FAULT_KINDS)


# --------------------------------------------------------------------------- fault validation


@pytest.mark.parametrize(("raw", "key", "why"), [
    ({"kind": "melt", "device": "shoe", "card": 1}, "f.kind", "not one of"),
    ({"device": "shoe", "card": 1}, "f.kind", "missing"),
    ({"kind": "jam", "card": 1}, "f.device", "missing"),
    ({"kind": "jam", "device": "scanner", "card": 1}, "f.device", "cannot have a jam"),
    ({"kind": "jam", "device": "toaster", "card": 1}, "f.device", "not one of"),
    ({"kind": "jam", "device": "shoe"}, "f", "exactly one trigger"),
    ({"kind": "jam", "device": "shoe", "card": 1, "time": 2}, "f", "exactly one trigger"),
    ({"kind": "jam", "device": "shoe", "shuffle": 1}, "f.shuffle", "only a shuffler"),
    ({"kind": "jam", "device": "shoe", "card": 0}, "f.card", "out of range"),
    ({"kind": "jam", "device": "shoe", "card": 1.5}, "f.card", "expected an integer"),
    ({"kind": "jam", "device": "shoe", "time": -1}, "f.time", "out of range"),
    ({"kind": "jam", "device": "shoe", "card": 1, "seconds": "x"}, "f.seconds", "a number"),
    ({"kind": "garble", "device": "shoe", "card": 1, "bits": 9}, "f.bits", "out of range"),
    ({"kind": "garble", "device": "shoe", "card": 1, "seconds": 2}, "f.seconds", "unknown key"),
    ({"kind": "unshuffled", "device": "shuffler", "card": 3}, "f.card", "shuffle or time"),
    ({"kind": "foreign", "device": "shoe", "card": 3, "face": ""}, "f.face", "non-empty"),
])
def test_fault_validation(raw: dict, key: str, why: str) -> None:
    with pytest.raises(FaultError) as e:
        make_fault(raw, "f")
    assert e.value.key == key and why in e.value.why


def test_fault_defaults() -> None:
    f = fault("jam", card=3)
    assert (f["seconds"], f["detail"], f.trigger()) == (2.0, "card jammed at the exit",
                                                        ("card", 3))
    assert make_fault({"kind": "silent", "device": "scanner", "time": 1}).time == 1.0


# --------------------------------------------------------------------------- dealer mistakes


def _codes(profile_name: str, steps: list) -> Counter[str]:
    engine = TableEngine(load_profile(profile_name))
    out: Counter[str] = Counter()
    for s in steps:
        for o in engine.handle(parse_event(s.event)):
            if isinstance(o, Deviation):
                out[o.code] += 1
    return out


@pytest.mark.parametrize(("kind", "profile", "params"), [
    ("burn_four", "gr-blackjack", {}),
    ("burn_four", "ru-blackjack", {"shoe": 2}),
    ("cut_too_shallow", "gr-blackjack", {}),
    ("cut_too_shallow", "gr-stud-poker", {"shoe": 3}),
    ("deal_before_bets_close", "live-baccarat", {}),
    ("play_past_last_hand", "gr-blackjack", {"cards": 1}),
    ("skip_shuffle", "gr-blackjack", {}),
    ("skip_closing_check", "gr-chemin-de-fer", {}),
])
def test_each_mistake_raises_its_deviation(kind: str, profile: str, params: dict) -> None:
    p = load_profile(profile)
    steps = table_day(p, 11)
    assert _codes(profile, steps) == Counter()
    mutated = apply_mistakes(steps, p, [Mistake(kind, params)])
    assert mutated != steps
    codes = _codes(profile, mutated)
    assert codes[MISTAKES[kind].code] == 1, codes


def test_every_mistake_kind_is_tested() -> None:
    tested = {"burn_four", "cut_too_shallow", "deal_before_bets_close", "play_past_last_hand",
              "skip_shuffle", "skip_closing_check"}
    assert tested == set(MISTAKES)


@pytest.mark.parametrize(("kind", "profile", "params", "why"), [
    ("burn_four", "gr-chemin-de-fer", {}, "burns no cards"),
    ("play_past_last_hand", "gr-stud-poker", {}, "no cut card"),
    ("skip_shuffle", "gr-blackjack", {"shoe": 9}, "no shuffle for shoe 9"),
])
def test_a_mistake_that_does_not_fit_the_day(kind: str, profile: str, params: dict,
                                             why: str) -> None:
    p = load_profile(profile)
    with pytest.raises(FaultError) as e:
        apply_mistakes(table_day(p, 1), p, [Mistake("skip_closing_check"), Mistake(kind, params)])
    assert e.value.key.startswith("mistake[2]") and why in e.value.why


@covers("disconnect")
def test_a_pause_fault_at_a_scans_first_card_comes_before_the_scan() -> None:
    sc = greeted(Scanner(rng=random.Random(1), faults=[
        fault("disconnect", "scanner", card=53, seconds=0.1)]))
    sc.scan(DECK)
    sc.scan(DECK)
    frames, _ = decode(sc.tick(0.0))
    assert [Kind(f.type).name for f in frames][-1] == "SCAN_END" and len(frames) == 54
    assert sc.link_down == 0.1
    sc.link_reset()
    sc.receive(encode(0, Kind.HELLO, {}), 1.0)
    frames, _ = decode(sc.tick(1.0))
    assert [Kind(f.type).name for f in frames[:3]] == ["ACK", "IDENTITY", "SCAN_BEGIN"]
