"""The card-reading shoe (SWP/1): cards out, the cut card, empty, door, jam, buttons.

| message | output |
|---|---|
| CARD_OUT ``{"card": "7H"}`` | ``card`` |
| CARD_OUT ``{"unreadable": true}``, or unusable | ``device_fault`` ``UNREADABLE_CARD`` |
| CUT_CARD_OUT | ``cut_card`` |
| SHOE_EMPTY | ``device_fault`` ``SHOE_EMPTY`` (cleared by the next card or cut card out) |
| DOOR ``{"open": true}`` / ``false`` | ``device_fault`` / ``device_ok`` ``DOOR_OPEN`` |
| JAM / JAM_CLEARED | ``device_fault`` / ``device_ok`` ``JAM`` |
| BUTTON | a notice for the text log (``kind`` BUTTON, ``data`` the payload) |
"""

from __future__ import annotations

from typing import ClassVar

from controller.events import CutCardSeen
from drivers.diagnostics import Output
from drivers.link import Message
from drivers.payload import body_str
from drivers.protocol import Kind
from drivers.swp import SwpDriver

SHOE_EMPTY = "SHOE_EMPTY"
JAM = "JAM"


class ShoeDriver(SwpDriver):
    kind: ClassVar[str] = "shoe"
    accepts: ClassVar[frozenset[int]] = frozenset({
        Kind.CARD_OUT, Kind.CUT_CARD_OUT, Kind.SHOE_EMPTY, Kind.DOOR, Kind.JAM,
        Kind.JAM_CLEARED, Kind.BUTTON})
    card_kinds: ClassVar[frozenset[int]] = frozenset({Kind.CARD_OUT})

    def handle(self, msg: Message, t: str) -> list[Output]:
        body = msg.body
        match msg.kind:
            case Kind.CARD_OUT:  # (the card read first: a payload that does not read
                # cleared SHOE_EMPTY here and never told the engine — a review)
                drawn = self.card(body, t)
                return self.ok(SHOE_EMPTY, "cards again", t=t) + drawn
            case Kind.CUT_CARD_OUT:
                return [*self.ok(SHOE_EMPTY, "cards again", t=t), CutCardSeen(t=t)]
            case Kind.SHOE_EMPTY:
                return self.fault(SHOE_EMPTY, "the shoe is empty", t=t)
            case Kind.DOOR:
                return self.door(body, t)
            case Kind.JAM:
                return self.fault(JAM, body_str(body, "detail", optional=True) or "jam", t=t)
            case Kind.JAM_CLEARED:
                return self.ok(JAM, "jam cleared", t=t)
            case Kind.BUTTON:
                body_str(body, "button")
                return [self.notice(msg)]
        return []  # pragma: no cover - accepts lists exactly the cases above

    def unusable(self, kind: int, detail: str) -> list[Output]:
        """A jam we cannot read is still a jam: play stops until it is cleared."""
        if kind == Kind.JAM:
            return self.fault(JAM, f"unreadable JAM message ({detail})"[:300])
        return super().unusable(kind, detail)
