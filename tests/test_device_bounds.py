"""Nothing a device sends makes the controller hold without limit (issue 8).

A device is untrusted input: every set, list and buffer it can grow is bounded, and
what goes past a bound is still reported (a fault still stops play).
"""

from __future__ import annotations

import itertools
import tracemalloc

from controller.events import DeckCheck, DeviceFault
from drivers.base import MAX_OPEN_FAULTS
from drivers.diagnostics import DeviceDiagnostic
from drivers.framing import encode
from drivers.link import MAX_RESEND, ProtocolLink
from drivers.payload import MAX_CHECK_CARDS
from drivers.protocol import Kind
from drivers.scanner import ScannerDriver
from drivers.shuffler import ShufflerDriver

T = "2026-11-24T10:00:00.000Z"


def connected(cls):  # type: ignore[no-untyped-def]
    driver = cls(cls.kind, utc=lambda: T)
    driver.open(0.0)
    seq = itertools.count()
    ident = {"kind": cls.kind, "model": "SW-1", "serial": "S1", "firmware": "1",
             "firmware_hash": "sha256:00"}
    driver.feed(encode(next(seq), Kind.ACK, {"ack": 0})
                + encode(next(seq), Kind.IDENTITY, ident), 0.0)
    assert driver.state == "ready"
    return driver, seq


def faults(out: list) -> list[DeviceFault]:
    return [o for o in out if isinstance(o, DeviceFault)]


def test_shuffler_fault_codes_are_bounded_and_still_faults() -> None:
    sh, seq = connected(ShufflerDriver)
    out: list = []
    for i in range(5_000):
        out += sh.feed(encode(next(seq), Kind.FAULT, {"code": f"E{i}", "detail": "x" * 900}),
                       1.0)
    assert len(sh.open_faults) <= MAX_OPEN_FAULTS + 1  # its own codes, then the generic FAULT
    assert all(len(d or "") <= 300 for d in sh.open_faults.values())
    got = faults(out)
    assert [f.code for f in got[:MAX_OPEN_FAULTS]] == [f"E{i}" for i in range(MAX_OPEN_FAULTS)]
    assert got[MAX_OPEN_FAULTS].code == "FAULT"  # play still stops on the next one
    assert f"E{MAX_OPEN_FAULTS}" in (got[MAX_OPEN_FAULTS].detail or "")


def test_a_fault_code_that_is_not_a_name_is_the_generic_fault() -> None:
    sh, seq = connected(ShufflerDriver)
    out = sh.feed(encode(next(seq), Kind.FAULT, {"code": "jam; rm -rf / " + "z" * 500}), 1.0)
    (f,) = faults(out)
    assert f.code == "FAULT" and "jam; rm -rf" in (f.detail or "") and len(f.detail or "") <= 300
    out = sh.feed(encode(next(seq), Kind.FAULT, {"code": "motor_stall"}), 1.0)
    assert [f.code for f in faults(out)] == ["MOTOR_STALL"]  # a real code, normalised


def test_a_scan_that_never_ends_is_dropped_at_the_bound() -> None:
    sc, seq = connected(ScannerDriver)
    sc.feed(encode(next(seq), Kind.SCAN_BEGIN, {"expected": 52}), 1.0)
    out: list = []
    for _ in range(MAX_CHECK_CARDS + 10):
        out += sc.feed(encode(next(seq), Kind.SCAN_CARD, {"card": "AS"}), 1.0)
    assert sc.scan is None or sc.scan.seen <= MAX_CHECK_CARDS
    assert any(isinstance(o, DeviceDiagnostic) and o.kind == "scan_abandoned" for o in out)
    assert not any(isinstance(o, DeckCheck) for o in out)  # no half check reaches the engine


def test_a_split_deck_check_is_bounded() -> None:
    sh, seq = connected(ShufflerDriver)
    out: list = []
    cards = ["AS"] * 150
    for part in range(1, 20):
        out += sh.feed(encode(next(seq), Kind.DECK_CHECK,
                              {"cards": cards, "part": part, "parts": 20}), 1.0)
    assert sh._parts is None or sum(map(len, sh._parts[1])) <= MAX_CHECK_CARDS
    assert any(isinstance(o, DeviceDiagnostic) and o.kind == "deck_check_parts" for o in out)
    out = sh.feed(encode(next(seq), Kind.DECK_CHECK,
                         {"cards": cards, "part": 1, "parts": 100_000}), 1.0)
    assert sh._parts is None
    assert any(isinstance(o, DeviceDiagnostic) and o.kind == "bad_payload" for o in out)


def test_frames_held_behind_an_unfilled_hole_are_bounded() -> None:
    link = ProtocolLink()
    link.connect(0.0)
    link.receive(encode(0, Kind.ACK, {"ack": 0})
                 + encode(1, Kind.IDENTITY, {"kind": "shoe", "model": "m", "serial": "s",
                                             "firmware": "1", "firmware_hash": "h"}), 0.0)
    assert link.state == "ready"
    out = link.receive(encode(5, Kind.CARD_OUT, {"card": "AS"}), 0.1)  # 2..4 missing
    assert link.gap is not None
    for s in range(6, 6 + 3 * MAX_RESEND):
        out += link.receive(encode(s, Kind.CARD_OUT, {"card": "KD"}), 0.2)
    assert link.gap is None or len(link.gap.held) <= 2 * MAX_RESEND
    assert any(getattr(o, "code", "") == "LOST_FRAMES" for o in out)


def test_lost_sequence_numbers_are_forgotten_beyond_a_bound() -> None:
    link = ProtocolLink()
    link.lost.update(range(60_000))
    assert len(link.lost) <= 4 * MAX_RESEND and 59_999 in link.lost and 0 not in link.lost


def test_memory_stays_flat_under_a_flood_of_faults() -> None:
    sh, seq = connected(ShufflerDriver)
    tracemalloc.start()
    try:
        for i in range(2_000):
            sh.feed(encode(next(seq), Kind.FAULT, {"code": f"C{i}", "detail": "d" * 200}), 1.0)
        first, _ = tracemalloc.get_traced_memory()
        for i in range(2_000, 6_000):
            sh.feed(encode(next(seq), Kind.FAULT, {"code": f"C{i}", "detail": "d" * 200}), 1.0)
        second, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert second - first < 200_000, (first, second)
