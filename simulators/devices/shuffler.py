"""Shufflers: a batch shuffler (load a pack, shuffle, take it out for the shoe) and a
continuous shuffler (it also deals: DELIVERED; the round's cards go back in:
DISCARDS_ACCEPTED).

A shuffle is ``rng.shuffle(stack)``: Fisher–Yates over the device's random source — a
seeded ``random.Random`` for a reproducible run, else ``secrets.SystemRandom`` — or over
any object with a ``shuffle(list)`` method, such as :class:`ScriptedOrder`, which the pty
host passes so the pack comes out in the order the simulated dealer's seeded shuffle chose.

Commands (each ACKed first): CMD_SHUFFLE (SHUFFLE_STARTED, SHUFFLE_DONE), CMD_DECK_CHECK
(DECK_CHECK), CMD_EJECT (the pack is taken out; STATUS), CMD_STATUS (STATUS).

A DECK_CHECK lists the cards **sorted** (it never reveals the order of a shuffled pack).
A payload holds at most 1024 bytes, about 200 cards: a larger pack is reported in several
DECK_CHECK frames ``{"cards": [...], "part": i, "parts": n}`` (a simulator extension of
docs/protocol.md; a pack that fits is one frame without those keys), counted as one event.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any

from drivers.protocol import Kind
from simulators import shuffles
from simulators.devices.base import Device
from simulators.faults import Fault

SHUFFLE_FAULTS = frozenset({"unshuffled", "riffle", "shelf", "slug"})


class ScriptedOrder:
    """A stand-in for a random source whose ``shuffle(x)`` puts ``x`` in a given order: the
    cards of ``order`` that ``x`` holds first (in that order), then the rest of ``x`` in
    its current order. The pty host uses it so the devices deal exactly the cards of the
    step list, which the simulated dealer's own seeded Fisher–Yates shuffle produced."""

    def __init__(self, order: Sequence[str]) -> None:
        self.order = list(order)

    def shuffle(self, x: list[str]) -> None:
        pool = Counter(x)
        first: list[str] = []
        for c in self.order:
            if pool[c] > 0:
                first.append(c)
                pool[c] -= 1
        rest = []
        for c in x:
            if pool[c] > 0:
                rest.append(c)
                pool[c] -= 1
        x[:] = first + rest


class ShufflerState(StrEnum):
    """What a simulated shuffler holds, as its STATUS reports it (equal to the plain string)."""

    EMPTY = "empty"  # nothing loaded, or the pack was taken out
    LOADED = "loaded"  # cards in, not shuffled since
    READY = "ready"  # shuffled: the pack can be taken out (or, continuous, dealt)
    FAULT = "fault"  # a fault is open (STATUS only; the state underneath is kept)


class Shuffler(Device):
    kind = "shuffler"
    model_key = "batch_shuffler"
    commands = frozenset({Kind.CMD_SHUFFLE, Kind.CMD_DECK_CHECK, Kind.CMD_EJECT,
                          Kind.CMD_STATUS})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stack: list[str] = []
        self.last_out: list[str] = []  # the pack as it was last taken out
        #: the last shoe's discards as the dealer collected and brought them (a riffle's)
        self.discards: list[str] = []
        self.state = ShufflerState.EMPTY
        self.door_open = False
        self.faulted: set[str] = set()

    # ------------------------------------------------------------------ dealer actions

    def load(self, cards: Iterable[str]) -> None:
        """Cards go into the shuffler (added to what it holds): LOADED with the count held."""
        self.stack.extend(cards)
        self.state = ShufflerState.LOADED
        self._emit(Kind.LOADED, {"count": len(self.stack)})

    def take_discards(self, cards: Iterable[str]) -> None:
        """The dealer brings the last shoe's discards and stub, as collected (hand by hand,
        round by round, then the cards never dealt): what a riffle of the last pack
        (``riffle`` with ``of = "last"``) riffles. No message: the pack is loaded as
        before."""
        self.discards = list(cards)

    def shuffle(self, rng: Any = None) -> list[str]:
        """Shuffle what it holds with ``rng`` (default: the device's own); SHUFFLE_STARTED,
        SHUFFLE_DONE. Returns the new order. A shuffle fault changes what the shuffle does:
        ``unshuffled`` leaves the pack as loaded, ``riffle`` and ``shelf`` apply those weak
        shuffles to it (with the device's own random source), ``slug`` shuffles and then
        puts a run of the last shoe's discards (as brought: :meth:`take_discards`) back
        together (simulators/shuffles.py; each slug card swapped into place, so the rest
        of the pack stays where it was)."""
        wire, content = self._at_point(self._point("shuffle"))
        self._emit(Kind.SHUFFLE_STARTED)
        model: Fault | None = None
        for f in content:
            if f.kind in SHUFFLE_FAULTS:
                model = f
            else:  # a card fault given a shuffle trigger waits for the next card / check
                self._armed_content.append(f)
        if model is None or model.kind == "slug":
            (rng if rng is not None else self.rng).shuffle(self.stack)
        if model is not None:
            self.stack = self._weak(model)
        self.state = ShufflerState.READY
        self._emit(Kind.SHUFFLE_DONE, {"count": len(self.stack)}, wire=wire)
        return list(self.stack)

    def _weak(self, f: Fault) -> list[str]:
        last = self.discards or self.last_out  # the last shoe's pack, as brought if it was
        if f.kind == "riffle":
            order = last if f["of"] == "last" and last else self.stack
            return shuffles.riffle(order, self.rng, f["times"])
        if f.kind == "shelf":
            return shuffles.shelf_pass(self.stack, self.rng, f["shelves"])
        if f.kind == "slug":
            slug = last[f["start"] - 1:f["start"] - 1 + f["cards"]]
            return shuffles.place_slug(self.stack, slug, f["at"] - 1)
        return self.stack  # unshuffled

    def eject(self) -> list[str]:
        """The pack is taken out (first card first). No message."""
        out, self.stack = self.stack, []
        if out:
            self.last_out = list(out)
        self.state = ShufflerState.EMPTY
        return out

    def deck_check(self) -> list[str]:
        """Read every card held: DECK_CHECK (sorted). Returns the cards reported."""
        wire, content = self._at_point(self._point("check"))
        cards = sorted(self.stack)
        if cards and any(f.kind == "missing" for f in content):
            cards.pop(self.rng.randrange(len(cards)))
        parts = _split(cards, self._fits)
        for i, part in enumerate(parts, 1):
            body: dict[str, Any] = {"cards": part}
            if len(parts) > 1:
                body.update(part=i, parts=len(parts))
            last = i == len(parts)
            self._emit(Kind.DECK_CHECK, body, wire=wire if last else None, counted=last)
        return cards

    def status_body(self) -> dict[str, Any]:
        state = ShufflerState.FAULT if self.faulted else self.state
        return {"state": state, "cards": len(self.stack)}

    def status(self) -> None:
        """An unsolicited STATUS (not an input event)."""
        self._emit(Kind.STATUS, self.status_body())

    def fault(self, code: str, detail: str = "") -> None:
        self.faulted.add(code)
        self._emit(Kind.FAULT, {"code": code, "detail": detail})

    def clear_fault(self, code: str) -> None:
        self.faulted.discard(code)
        self._emit(Kind.FAULT_CLEARED, {"code": code})

    def door(self, open_: bool) -> None:
        self.door_open = open_
        self._emit(Kind.DOOR, {"open": open_})

    # ------------------------------------------------------------------ commands and faults

    def _command(self, kind: Kind, body: dict[str, Any]) -> None:
        if kind == Kind.CMD_SHUFFLE:
            self.shuffle()
        elif kind == Kind.CMD_DECK_CHECK:
            self.deck_check()
        elif kind == Kind.CMD_EJECT:
            self.eject()
            self._respond(Kind.STATUS, self.status_body())
        elif kind == Kind.CMD_STATUS:
            self._respond(Kind.STATUS, self.status_body())

    def _fault_episode(self, f: Fault) -> None:
        if f.kind == "jam":
            self._emit(Kind.FAULT, {"code": "JAM", "detail": f["detail"]})
            self._pause(f["seconds"])
            self._emit(Kind.FAULT_CLEARED, {"code": "JAM"})
        else:
            self._emit(Kind.DOOR, {"open": True})
            self._pause(f["seconds"])
            self._emit(Kind.DOOR, {"open": False})


class BatchShuffler(Shuffler):
    """Shuffles a pack the dealer then takes to the shoe."""

    model_key = "batch_shuffler"


class ContinuousShuffler(Shuffler):
    """Holds the pack, deals it (DELIVERED) and takes each round's cards back in."""

    model_key = "continuous_shuffler"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.out: list[str] = []  # delivered since the discards last went back
        self.delivered: Counter[str] = Counter()

    def deliver(self) -> str | None:
        """The next card comes out of the shuffler's shoe: DELIVERED. Returns it, or None
        (and FAULT code EMPTY) when the shuffler holds no card."""
        if not self.stack:
            self.fault("EMPTY", "no card to deliver")
            return None
        card = self.stack.pop(0)
        wire, content = self._at_point(self._point("card"))
        body: dict[str, Any] = {"card": card}
        for f in content:
            if f.kind == "foreign":
                self._emit(Kind.DELIVERED, {"card": f["face"] or self._most_dealt(card)})
            elif f.kind == "unreadable":
                body = {"unreadable": True}
        self.out.append(card)
        self.delivered[card] += 1
        self._emit(Kind.DELIVERED, body, wire=wire)
        return card

    def _most_dealt(self, card: str) -> str:
        if not self.delivered:
            return card
        top = max(self.delivered.values())
        return next(c for c in reversed(self.out) if self.delivered[c] == top)

    def accept_discards(self, cards: Iterable[str] | None = None, rng: Any = None) -> int:
        """The round's cards go back in (default: every card delivered since the last
        return) and are shuffled in: DISCARDS_ACCEPTED with their count."""
        back = list(self.out if cards is None else cards)
        self.stack.extend(back)
        (rng if rng is not None else self.rng).shuffle(self.stack)
        self.out = []
        self.delivered = Counter()
        self._emit(Kind.DISCARDS_ACCEPTED, {"count": len(back)})
        return len(back)


def _split(cards: list[str], fits: Any) -> list[list[str]]:
    """Cards in as few consecutive parts as fit a payload each (at least one part)."""
    if fits({"cards": cards}):
        return [cards]
    parts: list[list[str]] = []
    size = 150
    for i in range(0, len(cards), size):
        parts.append(cards[i:i + size])
    n = len(parts)
    assert all(fits({"cards": p, "part": n, "parts": n}) for p in parts)
    return parts
