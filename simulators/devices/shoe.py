"""A card-reading shoe: the dealer loads a pack, draws cards one by one, the cut card slides
out; the reader reports each card (CARD_OUT), the cut card (CUT_CARD_OUT), an empty shoe
(SHOE_EMPTY), the door (DOOR), jams (JAM / JAM_CLEARED) and the dealer's buttons (BUTTON).

For a hand-dealt game (stud poker) the pty host uses the same model as the card reader
the dealer deals through.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from drivers.protocol import Kind
from simulators.devices.base import Device
from simulators.faults import Fault


class Shoe(Device):
    kind = "shoe"
    model_key = "shoe"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.stack: list[str] = []
        self.drawn: Counter[str] = Counter()  # faces drawn since the last load
        self.jammed = False
        self.door_open = False

    # ------------------------------------------------------------------ dealer actions

    def load(self, cards: Iterable[str]) -> None:
        """Put a pack in the shoe; the first card listed comes out first. No message."""
        self.stack = list(cards)
        self.drawn = Counter()

    @property
    def remaining(self) -> int:
        return len(self.stack)

    def draw(self) -> str | None:
        """The next card leaves the shoe and is read (CARD_OUT). Returns the card, or None
        (and SHOE_EMPTY) if the shoe is empty. Faults at this card number apply here."""
        if not self.stack:
            self._emit(Kind.SHOE_EMPTY)
            return None
        card = self.stack.pop(0)
        wire, content = self._at_point(self._point("card"))
        body: dict = {"card": card}
        for f in content:
            if f.kind == "foreign":
                self._emit(Kind.CARD_OUT, {"card": self._foreign_face(f, card)})
            elif f.kind == "unreadable":
                body = {"unreadable": True}
        self.drawn[card] += 1
        self._emit(Kind.CARD_OUT, body, wire=wire)
        return card

    def _foreign_face(self, f: Fault, card: str) -> str:
        if f["face"]:
            return f["face"]
        if not self.drawn:
            return card
        top = max(self.drawn.values())
        return next(c for c in reversed(list(self.drawn)) if self.drawn[c] == top)

    def cut_card_out(self) -> None:
        """The cut card slides out and is seen by the reader."""
        self._emit(Kind.CUT_CARD_OUT)

    def door(self, open_: bool) -> None:
        self.door_open = open_
        self._emit(Kind.DOOR, {"open": open_})

    def jam(self, detail: str = "card jammed at the exit") -> None:
        self.jammed = True
        self._emit(Kind.JAM, {"detail": detail})

    def clear_jam(self) -> None:
        self.jammed = False
        self._emit(Kind.JAM_CLEARED)

    def press(self, button: str) -> None:
        """A dealer button on the shoe (BUTTON; not an input event by itself)."""
        self._emit(Kind.BUTTON, {"button": button})

    # ------------------------------------------------------------------ faults

    def _fault_episode(self, f: Fault) -> None:
        if f.kind == "jam":
            self._emit(Kind.JAM, {"detail": f["detail"]})
            self._pause(f["seconds"])
            self._emit(Kind.JAM_CLEARED)
        else:
            self._emit(Kind.DOOR, {"open": True})
            self._pause(f["seconds"])
            self._emit(Kind.DOOR, {"open": False})
