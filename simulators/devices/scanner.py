"""A deck scanner: the dealer feeds the whole pack through it; it reports SCAN_BEGIN
(the count it expects, if configured), one SCAN_CARD per card read, and SCAN_END with the
count read. The driver turns one scan into one ``deck_check`` event.
"""

from __future__ import annotations

from collections.abc import Iterable

from drivers.protocol import Kind
from simulators.devices.base import Device
from simulators.faults import PAUSE, Fault


class Scanner(Device):
    kind = "scanner"
    model_key = "scanner"

    def __init__(self, *args, expected: int | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.expected = expected

    def _content_point(self, f: Fault) -> str:
        return "card"  # a scanner's missing card is the next card it reads

    def scan(self, cards: Iterable[str], expected: int | None = None) -> list[str]:
        """Scan a pack in the order given. Returns what was reported, in order
        (``"?"`` for an unreadable card). Faults at these card numbers apply here."""
        exp = expected if expected is not None else self.expected
        self._point("check")
        # a jam-like fault at the scan's first card happens before the scan starts
        first = self.counters["card"] + 1
        early = [f for f in self.faults if f.card == first and f.layer == PAUSE]
        self.faults = [f for f in self.faults if f not in early]
        self._at_point(early)
        self._emit(Kind.SCAN_BEGIN, {"expected": exp})
        read: list[str] = []
        for card in cards:
            wire, content = self._at_point(self._point("card"))
            body: dict = {"card": card}
            skip = False
            for f in content:
                if f.kind == "foreign":
                    face = f["face"] or "JK"
                    self._emit(Kind.SCAN_CARD, {"card": face})
                    read.append(face)
                elif f.kind == "unreadable":
                    body = {"unreadable": True}
                elif f.kind == "missing":
                    skip = True
            if skip:
                self._armed_wire.extend(wire)
                continue
            self._emit(Kind.SCAN_CARD, body, wire=wire)
            read.append(card if "card" in body else "?")
        self._emit(Kind.SCAN_END, {"count": len(read)})
        return read
