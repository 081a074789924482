"""The simulated devices speak SWP/1 (docs/protocol.md): what they send decodes with the
drivers' own framer into the right messages; handshake, numbering, heartbeat timing with
injected time, the resend buffer, and commands acknowledged then answered."""

from __future__ import annotations

import random
import secrets
from collections import Counter
from typing import Any

import pytest

from controller.cards import pack
from drivers.framing import MAX_PAYLOAD, Frame, FrameDecoder, FramingError, encode
from drivers.protocol import HEARTBEAT_PERIOD, Identity, Kind
from simulators.devices import (
    DEFAULT_IDENTITIES,
    RESEND_DEPTH,
    BatchShuffler,
    ContinuousShuffler,
    Device,
    Scanner,
    ScriptedOrder,
    Shoe,
)


class Wire:
    """The controller's end of one device, on injected time."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.decoder = FrameDecoder()
        self.seq = 0
        self.now = 0.0
        self.errors: list[FramingError] = []

    def send(self, kind: int, body: dict[str, Any] | None = None, seq: int | None = None) -> int:
        seq = self.seq if seq is None else seq
        self.device.receive(encode(seq, kind, body or {}), self.now)
        if seq == self.seq:
            self.seq += 1
        return seq

    def hello(self) -> list[Frame]:
        self.send(Kind.HELLO, {"controller": "shoewarden test"})
        return self.read()

    def read(self, at: float | None = None) -> list[Frame]:
        if at is not None:
            self.now = at
        out: list[Frame] = []
        for item in self.decoder.feed(self.device.tick(self.now)):
            if isinstance(item, Frame):
                out.append(item)
            else:
                self.errors.append(item)
        return out


def kinds(frames: list[Frame]) -> list[str]:
    return [Kind(f.type).name for f in frames]


def rng() -> random.Random:
    return random.Random(7)


# --------------------------------------------------------------------------- handshake


@pytest.mark.parametrize("cls", [Shoe, Scanner, BatchShuffler, ContinuousShuffler])
def test_nothing_before_hello_then_ack_and_identity(cls: type[Device]) -> None:
    dev = cls(rng=rng())
    w = Wire(dev)
    assert w.read(at=5.0) == []  # no heartbeat, nothing, until greeted
    frames = w.hello()
    assert kinds(frames) == ["ACK", "IDENTITY"]
    assert [f.seq for f in frames] == [0, 1]
    assert frames[0].body() == {"ack": 0}
    ident = Identity.from_body(frames[1].body())
    assert ident.kind == {"Shoe": "shoe", "Scanner": "scanner"}.get(cls.__name__, "shuffler")
    assert ident == DEFAULT_IDENTITIES[cls.model_key]
    assert ident.firmware_hash.startswith("sha256:") and len(ident.firmware_hash) == 71


def test_identity_is_configurable() -> None:
    ident = Identity("shoe", "ACME-9", "X1", "9.9", "sha256:00")
    frames = Wire(Shoe(ident, rng=rng())).hello()
    assert frames[1].body() == {"kind": "shoe", "model": "ACME-9", "serial": "X1",
                                "firmware": "9.9", "firmware_hash": "sha256:00"}


def test_events_before_hello_are_kept_and_follow_the_handshake() -> None:
    shoe = Shoe(rng=rng())
    shoe.load(["AS", "KD"])
    shoe.draw()
    w = Wire(shoe)
    assert w.read(at=1.0) == []
    frames = w.hello()
    assert kinds(frames) == ["ACK", "IDENTITY", "CARD_OUT"]
    assert frames[2].body() == {"card": "AS"} and frames[2].seq == 2


def test_hello_again_restarts_numbering() -> None:
    shoe = Shoe(rng=rng())
    w = Wire(shoe)
    w.hello()
    shoe.load(["AS", "KD", "7H"])
    shoe.draw()
    shoe.draw()
    assert [f.seq for f in w.read()] == [2, 3]
    frames = w.hello()
    assert [(f.seq, Kind(f.type).name) for f in frames] == [(0, "ACK"), (1, "IDENTITY")]
    shoe.draw()
    assert [f.seq for f in w.read()] == [2]


# --------------------------------------------------------------------------- heartbeat


def test_heartbeat_every_period_when_idle() -> None:
    shoe = Shoe(rng=rng())
    w = Wire(shoe)
    w.hello()  # at 0.0
    beats = []
    t = 0.0
    while t < 5.0:
        t = round(t + 0.05, 2)
        beats += [(t, f.seq) for f in w.read(at=t) if f.type == Kind.HEARTBEAT]
    assert [b[0] for b in beats] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert [b[1] for b in beats] == [2, 3, 4, 5, 6]
    assert all(f.body() == {} for f in w.read(at=6.0))


def test_heartbeat_only_when_nothing_else_was_sent() -> None:
    shoe = Shoe(rng=rng(), heartbeat=0.5)
    shoe.load([str(c) for c in pack(1)])
    w = Wire(shoe)
    w.hello()
    sent = []
    for i in range(1, 21):
        shoe.draw()  # a card every 0.3 s: always something newer than 0.5 s
        sent += w.read(at=i * 0.3)
    assert "HEARTBEAT" not in kinds(sent)
    assert kinds(w.read(at=6.3)) == []
    assert kinds(w.read(at=6.5)) == ["HEARTBEAT"]


def test_default_heartbeat_period_is_the_protocols() -> None:
    assert Shoe().heartbeat == HEARTBEAT_PERIOD == 1.0


# --------------------------------------------------------------------------- shoe


def test_shoe_messages() -> None:
    shoe = Shoe(rng=rng())
    w = Wire(shoe)
    w.hello()
    shoe.load(["7H", "AS"])
    assert shoe.draw() == "7H"
    shoe.cut_card_out()
    shoe.jam("stuck")
    shoe.clear_jam()
    shoe.door(True)
    shoe.door(False)
    shoe.press("next")
    assert shoe.draw() == "AS"
    assert shoe.draw() is None
    frames = w.read()
    assert [(Kind(f.type).name, f.body()) for f in frames] == [
        ("CARD_OUT", {"card": "7H"}), ("CUT_CARD_OUT", {}), ("JAM", {"detail": "stuck"}),
        ("JAM_CLEARED", {}), ("DOOR", {"open": True}), ("DOOR", {"open": False}),
        ("BUTTON", {"button": "next"}), ("CARD_OUT", {"card": "AS"}), ("SHOE_EMPTY", {}),
    ]
    assert [f.seq for f in frames] == list(range(2, 11))
    # BUTTON is the only one that is not an input event
    assert shoe.events_emitted == 8


def test_frames_are_byte_exact_swp1() -> None:
    shoe = Shoe(rng=rng())
    w = Wire(shoe)
    w.hello()
    shoe.load(["7H"])
    shoe.draw()
    assert shoe.tick(0.0) == encode(2, Kind.CARD_OUT, {"card": "7H"})


# --------------------------------------------------------------------------- scanner


def test_scanner_scan() -> None:
    scanner = Scanner(rng=rng(), expected=52)
    w = Wire(scanner)
    w.hello()
    cards = [str(c) for c in pack(1)]
    assert scanner.scan(cards) == cards
    frames = w.read()
    assert kinds(frames) == ["SCAN_BEGIN"] + ["SCAN_CARD"] * 52 + ["SCAN_END"]
    assert frames[0].body() == {"expected": 52}
    assert [f.body()["card"] for f in frames[1:-1]] == cards
    assert frames[-1].body() == {"count": 52}
    assert scanner.events_emitted == 1  # one scan, one deck_check
    scanner.scan(["AS"], expected=None)
    scanner.expected = None
    scanner.scan(["AS"])
    assert [f.body() for f in w.read() if f.type == Kind.SCAN_BEGIN] == [{"expected": 52},
                                                                        {"expected": None}]


# --------------------------------------------------------------------------- shufflers


def test_batch_shuffler_load_shuffle_eject() -> None:
    sh = BatchShuffler(rng=random.Random(3))
    w = Wire(sh)
    w.hello()
    cards = [str(c) for c in pack(2)]
    sh.load(cards)
    order = sh.shuffle()
    expected = list(cards)
    random.Random(3).shuffle(expected)  # Fisher–Yates over the seeded random source
    assert order == expected != cards
    assert sh.eject() == expected and sh.stack == []
    frames = w.read()
    assert [(Kind(f.type).name, f.body()) for f in frames] == [
        ("LOADED", {"count": 104}), ("SHUFFLE_STARTED", {}), ("SHUFFLE_DONE", {"count": 104})]
    assert sh.events_emitted == 1  # SHUFFLE_DONE


def test_unseeded_shuffler_uses_the_system_random_source() -> None:
    assert isinstance(BatchShuffler().rng, secrets.SystemRandom)
    a, b = BatchShuffler(), BatchShuffler()
    cards = [str(c) for c in pack(1)]
    a.load(cards)
    b.load(cards)
    assert a.shuffle() != b.shuffle()  # 1 in 52! of failing


def test_same_seed_same_shuffle() -> None:
    orders = []
    for _ in range(2):
        sh = BatchShuffler(rng=random.Random(42))
        sh.load([str(c) for c in pack(6)])
        orders.append(sh.shuffle())
    assert orders[0] == orders[1]


def test_scripted_order() -> None:
    x = ["AS", "2S", "3S", "4S", "AS"]
    ScriptedOrder(["4S", "AS", "9H", "AS", "AS"]).shuffle(x)
    assert x == ["4S", "AS", "AS", "2S", "3S"]


def test_continuous_shuffler_deals_and_takes_discards_back() -> None:
    sh = ContinuousShuffler(rng=random.Random(1))
    w = Wire(sh)
    w.hello()
    sh.load(["AS", "KD", "7H", "2C"])
    sh.shuffle(ScriptedOrder(["7H", "2C", "AS", "KD"]))
    assert [sh.deliver(), sh.deliver()] == ["7H", "2C"]
    assert sh.accept_discards(rng=ScriptedOrder(["2C", "KD", "7H", "AS"])) == 2
    assert sh.stack == ["2C", "KD", "7H", "AS"]
    sh.eject()
    assert sh.deliver() is None
    frames = w.read()
    assert [(Kind(f.type).name, f.body()) for f in frames] == [
        ("LOADED", {"count": 4}), ("SHUFFLE_STARTED", {}), ("SHUFFLE_DONE", {"count": 4}),
        ("DELIVERED", {"card": "7H"}), ("DELIVERED", {"card": "2C"}),
        ("DISCARDS_ACCEPTED", {"count": 2}),
        ("FAULT", {"code": "EMPTY", "detail": "no card to deliver"}),
    ]


def test_shuffler_fault_door_status() -> None:
    sh = BatchShuffler(rng=rng())
    w = Wire(sh)
    w.hello()
    sh.fault("JAM", "card stuck in the elevator")
    sh.status()
    sh.clear_fault("JAM")
    sh.door(True)
    assert [(Kind(f.type).name, f.body()) for f in w.read()] == [
        ("FAULT", {"code": "JAM", "detail": "card stuck in the elevator"}),
        ("STATUS", {"state": "fault", "cards": 0}), ("FAULT_CLEARED", {"code": "JAM"}),
        ("DOOR", {"open": True})]
    assert sh.events_emitted == 3  # STATUS is not an input event


# --------------------------------------------------------------------------- commands


def test_commands_are_acked_then_answered() -> None:
    sh = BatchShuffler(rng=random.Random(5))
    w = Wire(sh)
    w.hello()
    sh.load([str(c) for c in pack(1)])
    w.read()
    s1 = w.send(Kind.CMD_STATUS)
    assert [(Kind(f.type).name, f.body()) for f in w.read()] == [
        ("ACK", {"ack": s1}), ("STATUS", {"state": "loaded", "cards": 52})]
    s2 = w.send(Kind.CMD_SHUFFLE)
    assert kinds(w.read()) == ["ACK", "SHUFFLE_STARTED", "SHUFFLE_DONE"]
    s3 = w.send(Kind.CMD_DECK_CHECK)
    frames = w.read()
    assert kinds(frames) == ["ACK", "DECK_CHECK"] and frames[0].body() == {"ack": s3}
    assert frames[1].body()["cards"] == sorted(str(c) for c in pack(1))  # sorted: no order
    s4 = w.send(Kind.CMD_EJECT)
    assert [(Kind(f.type).name, f.body()) for f in w.read()] == [
        ("ACK", {"ack": s4}), ("STATUS", {"state": "empty", "cards": 0})]
    assert s2 == s1 + 1


def test_a_retried_command_is_acked_again_not_run_again() -> None:
    sh = BatchShuffler(rng=rng())
    w = Wire(sh)
    w.hello()
    sh.load(["AS", "KD"])
    w.read()
    seq = w.send(Kind.CMD_SHUFFLE)
    first = w.read()
    w.send(Kind.CMD_SHUFFLE, seq=seq)  # the controller did not see the ACK: same seq
    again = w.read()
    assert kinds(first) == ["ACK", "SHUFFLE_STARTED", "SHUFFLE_DONE"]
    assert kinds(again) == ["ACK"] and again[0].body() == {"ack": seq}
    assert again[0].seq == first[-1].seq + 1


@pytest.mark.parametrize("cls", [Shoe, Scanner])
def test_unsupported_command_is_naked(cls: type[Device]) -> None:
    w = Wire(cls(rng=rng()))
    w.hello()
    seq = w.send(Kind.CMD_SHUFFLE)
    (nak,) = w.read()
    assert nak.type == Kind.NAK and nak.body()["nak"] == seq and nak.body()["reason"]


def test_bad_payload_is_naked_and_bad_frames_are_ignored() -> None:
    sh = BatchShuffler(rng=rng())
    w = Wire(sh)
    w.hello()
    sh.receive(encode(5, Kind.CMD_STATUS, b"[1]"), 0.0)
    sh.receive(b"\xa5\x5a\x01garbage", 0.0)
    (nak,) = w.read()
    assert nak.type == Kind.NAK and nak.body()["nak"] == 5
    good = encode(6, Kind.CMD_STATUS, {})
    sh.receive(good[:-1] + bytes([good[-1] ^ 1]), 0.0)  # bad CRC: dropped, never answered
    assert w.read() == [] and sh.rx_errors >= 1


def test_commands_before_hello_are_ignored() -> None:
    sh = BatchShuffler(rng=rng())
    w = Wire(sh)
    w.send(Kind.CMD_STATUS)
    assert w.read() == []


# --------------------------------------------------------------------------- resend


def test_resend_returns_the_same_frames_same_numbers() -> None:
    shoe = Shoe(rng=rng())
    w = Wire(shoe)
    w.hello()
    shoe.load([str(c) for c in pack(1)])
    for _ in range(5):
        shoe.draw()
    wire = shoe.tick(0.0)
    frames = [f for f in FrameDecoder().feed(wire) if isinstance(f, Frame)]
    assert [f.seq for f in frames] == [2, 3, 4, 5, 6]
    seq = w.send(Kind.RESEND, {"from": 4})
    again = shoe.tick(0.0)
    got = [f for f in FrameDecoder().feed(again) if isinstance(f, Frame)]
    assert got[0].type == Kind.ACK and got[0].body() == {"ack": seq} and got[0].seq == 7
    assert got[1:] == frames[2:]
    assert again.endswith(b"".join(encode(f.seq, f.type, f.body()) for f in frames[2:]))
    shoe.draw()
    assert [f.seq for f in w.read()] == [8]  # numbering goes on after the resent frames


def test_resend_from_the_next_number_is_just_acked() -> None:
    shoe = Shoe(rng=rng())
    w = Wire(shoe)
    w.hello()
    w.send(Kind.RESEND, {"from": 2})
    assert kinds(w.read()) == ["ACK"]


def test_resend_buffer_holds_the_last_256_frames() -> None:
    # the protocol's least (docs/protocol.md); the simulated devices keep more by default,
    # a whole deck check's scan of 8 decks sent in one burst (418 frames) and more
    assert RESEND_DEPTH >= 418 + 256
    shoe = Shoe(rng=rng())
    shoe.resend_depth = 256
    w = Wire(shoe)
    w.hello()
    shoe.load([str(c) for c in pack(8)])
    for _ in range(300):
        shoe.draw()
    w.read()  # frames 2..301 sent
    last = 301
    oldest = last - shoe.resend_depth + 1
    w.send(Kind.RESEND, {"from": oldest - 1})
    (nak,) = w.read()
    assert nak.type == Kind.NAK and str(oldest - 1) in nak.body()["reason"]
    # the NAK (frame 302) is held too, pushing the oldest frame out
    w.send(Kind.RESEND, {"from": oldest + 1})
    got = w.read()
    assert got[0].type == Kind.ACK
    assert [f.seq for f in got[1:]] == list(range(oldest + 1, last + 2))
    assert got[-1].type == Kind.NAK


def test_resend_without_from_is_naked() -> None:
    w = Wire(Shoe(rng=rng()))
    w.hello()
    w.send(Kind.RESEND, {"from": "x"})
    assert kinds(w.read()) == ["NAK"]


def test_responses_overtake_queued_events_and_limit_holds_events_only() -> None:
    shoe = Shoe(rng=rng())
    w = Wire(shoe)
    w.hello()
    shoe.load([str(c) for c in pack(1)])
    for _ in range(10):
        shoe.draw()
    w.send(Kind.RESEND, {"from": 2})
    first = [f for f in FrameDecoder().feed(shoe.tick(0.0, limit=3)) if isinstance(f, Frame)]
    assert kinds(first) == ["ACK", "CARD_OUT", "CARD_OUT", "CARD_OUT"]
    assert shoe.pending() == 7


# --------------------------------------------------------------------------- sequence wrap


def test_sequence_numbers_wrap_to_zero() -> None:
    shoe = Shoe(rng=rng())
    w = Wire(shoe)
    w.hello()
    shoe.tx_seq = 65534
    shoe.load(["AS", "KD", "7H"])
    for _ in range(3):
        shoe.draw()
    assert [f.seq for f in w.read()] == [65534, 65535, 0]


def test_deck_check_too_big_for_one_frame_is_split() -> None:
    sh = BatchShuffler(rng=rng())
    w = Wire(sh)
    w.hello()
    sh.load([str(c) for c in pack(8)])
    w.read()
    sh.deck_check()
    frames = w.read()
    assert all(len(f.payload) <= MAX_PAYLOAD for f in frames)
    parts = [f.body() for f in frames]
    assert [p["part"] for p in parts] == list(range(1, len(parts) + 1)) and len(parts) > 1
    assert {p["parts"] for p in parts} == {len(parts)}
    cards = [c for p in parts for c in p["cards"]]
    assert Counter(cards) == Counter(str(c) for c in pack(8)) and cards == sorted(cards)
    assert sh.events_emitted == 1
    small = BatchShuffler(rng=rng())
    w2 = Wire(small)
    w2.hello()
    small.load(["AS"])
    small.deck_check()
    assert w2.read()[-1].body() == {"cards": ["AS"]}


def test_hello_retried_while_its_answer_is_still_coming_changes_nothing() -> None:
    from simulators.faults import make_fault

    slow = make_fault({"kind": "slow", "device": "scanner", "time": 0, "delay": 0.5,
                       "seconds": 10.0})
    sc = Scanner(rng=rng(), faults=[slow])
    sc.receive(encode(0, Kind.HELLO, {}), 0.0)
    assert sc.tick(0.0) == b""
    sc.receive(encode(0, Kind.HELLO, {}), 0.25)  # the controller's retry, same seq
    assert sc.tick(0.25) == b""
    frames = [f for f in FrameDecoder().feed(sc.tick(0.5)) if isinstance(f, Frame)]
    assert kinds(frames) == ["ACK", "IDENTITY"]  # answered at 0.5, not pushed back
    sc.receive(encode(0, Kind.HELLO, {}), 1.0)  # answered already: a new handshake
    frames = [f for f in FrameDecoder().feed(sc.tick(1.5)) if isinstance(f, Frame)]
    assert [(f.seq, Kind(f.type).name) for f in frames] == [(0, "ACK"), (1, "IDENTITY")]


def test_events_wait_for_the_answer_to_a_hello() -> None:
    """A slow scanner answers a retried HELLO as a new one (numbering from 0 again): events
    queued meanwhile leave after its IDENTITY, never numbered before it."""
    from simulators.faults import make_fault

    slow = make_fault({"kind": "slow", "device": "scanner", "time": 0, "delay": 0.5,
                       "seconds": 10.0})
    sc = Scanner(rng=rng(), faults=[slow])
    sc.receive(encode(0, Kind.HELLO, {}), 0.0)
    sc.tick(0.0)
    assert kinds([f for f in FrameDecoder().feed(sc.tick(0.5)) if isinstance(f, Frame)]) == [
        "ACK", "IDENTITY"]
    sc.scan(["AS", "KD"])  # queued (and slowed) before the retry comes
    sc.tick(0.55)
    sc.receive(encode(0, Kind.HELLO, {}), 0.6)  # the retry, after the answer went out
    sent = [f for t in (0.8, 1.06, 1.1, 1.2) for f in FrameDecoder().feed(sc.tick(t))
            if isinstance(f, Frame)]
    assert [(f.seq, Kind(f.type).name) for f in sent] == [
        (0, "ACK"), (1, "IDENTITY"), (2, "SCAN_BEGIN"), (3, "SCAN_CARD"), (4, "SCAN_CARD"),
        (5, "SCAN_END")]

