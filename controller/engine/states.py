"""The states of a table day, what each means, and which events are play.

:class:`State` is a ``StrEnum``: a member equals, hashes and encodes as its value, so a
state read from a log (``"burn"``) compares equal to ``State.BURN``. The engine keeps
its current state as the plain value (``State.BURN.value``): every audit record holds
it, and the audit writer's fast paths accept exact ``str`` only.

The module-level names (``BURN``, ``DEVICE_FAULT`` …) are the members themselves, for
the hot paths (a module global is one lookup; ``State.BURN`` is two) and for callers
that imported them before :class:`State` existed.
"""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    """The phases of a table day, in order. Which of them a table has depends on its profile
    (:func:`controller.engine.graph.states_for`)."""

    CLOSED = "closed"
    OPENING_CHECK = "opening_check"
    SHUFFLE = "shuffle"
    CUT = "cut"
    CUT_CARD = "cut_card"
    LOAD = "load"
    BURN = "burn"
    READY = "ready"
    ROUND = "round"
    LAST_ROUND = "last_round"
    RETURN_DISCARDS = "return_discards"
    SHOE_COMPLETE = "shoe_complete"
    CLOSING_CHECK = "closing_check"
    SUSPENDED = "suspended"
    DEVICE_FAULT = "device_fault"


CLOSED = State.CLOSED
OPENING_CHECK = State.OPENING_CHECK
SHUFFLE = State.SHUFFLE
CUT = State.CUT
CUT_CARD = State.CUT_CARD
LOAD = State.LOAD
BURN = State.BURN
READY = State.READY
ROUND = State.ROUND
LAST_ROUND = State.LAST_ROUND
RETURN_DISCARDS = State.RETURN_DISCARDS
SHOE_COMPLETE = State.SHOE_COMPLETE
CLOSING_CHECK = State.CLOSING_CHECK
SUSPENDED = State.SUSPENDED
DEVICE_FAULT = State.DEVICE_FAULT

ALL_STATES: tuple[State, ...] = tuple(State)
"""Every state, in the order of a table day."""

STATE_DESCRIPTIONS: dict[str, str] = {
    CLOSED: "the table is closed",
    OPENING_CHECK: "waiting for the opening count of the pack",
    SHUFFLE: "waiting for the shuffle",
    CUT: "waiting for the cut",
    CUT_CARD: "waiting for the cut card to be placed",
    LOAD: "waiting for the stack to be loaded",
    BURN: "burning cards",
    READY: "bets are open",
    ROUND: "a round is being dealt",
    LAST_ROUND: "the last round of the shoe is being dealt",
    RETURN_DISCARDS: "waiting for the round's cards to go back into the shuffler",
    SHOE_COMPLETE: "the shoe is finished",
    CLOSING_CHECK: "the pack has been counted for closing",
    SUSPENDED: "players left; the cards are withdrawn",
    DEVICE_FAULT: "a device fault is open",
}

# Events that are "play" for the purpose of DEVICE_FAULT (rounds, cards, shoe preparation).
PLAY_EVENTS = frozenset({
    "card", "cut_card", "bets_closed", "action", "stub_count", "shoe_loaded",
    "discards_returned", "shuffle", "cut", "cut_card_placed",
})

